package main

// The read rules of a confined call's Landlock ruleset, added by a warm
// child (warm.go) while it waits for its call. They are most of a
// ruleset's rules (one per entry of every split directory, readrules.go),
// and adding them costs a few system calls each. The call still plans its
// rules afresh, from the settings and the filesystem of its own time, and
// takes the ruleset made ahead only if nothing the plan rests on changed:
// the same rights and rules, each listed directory the same (its device
// and inode, and each entry's name and inode), each files-only directory
// the same inode, and no mount or unmount in this mount namespace since
// (/proc/self/mounts reports one to poll). Otherwise the call builds its
// ruleset from nothing, as a call in a cold process does.
//
// A rule is bound to the inode it was opened at. An entry replaced under
// its name since shows as another inode: the ruleset holds a reference to
// each inode it has a rule on, so none of their numbers is reused while
// it exists. An unmount releases those references, and is watched for.

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirStamp identifies a directory as a listing saw it: its device and
// inode, and each entry's name and inode.
type dirStamp struct {
	path     string
	dev, ino uint64
	entries  string // "name\x00inode\x00" for each entry, by name
}

// rulesAhead is the ruleset made ahead, until a call takes it.
var rulesAhead = struct {
	sync.Mutex
	// mounts is /proc/self/mounts, opened before the listing, or -1 when
	// none is made. It is not an os.File: the runtime's poller would take
	// the mount event that mountsChanged looks for.
	mounts int
	fd     int // the ruleset, while there is one
	plan   rulesetPlan
	dirs   []dirStamp
	taken  int // how many calls took one (for tests)
}{mounts: -1, fd: -1}

// stampedList lists a directory as os.ReadDir does (sorted by name, a
// symlinked directory followed) and appends its stamp to stamps. It reads
// the entries itself: os.ReadDir keeps no inode numbers.
func stampedList(stamps *[]dirStamp) listDir {
	buf := make([]byte, 8<<10) // touched once per plan: a page fault costs
	return func(dir string) ([]fs.DirEntry, error) {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, &fs.PathError{Op: "fstat", Path: dir, Err: err}
		}
		var ents []*dirent
		for {
			n, err := unix.Getdents(fd, buf)
			if err != nil {
				return nil, &fs.PathError{Op: "getdents", Path: dir, Err: err}
			}
			if n <= 0 {
				break
			}
			for off := 0; off < n; {
				d := (*unix.Dirent)(unsafe.Pointer(&buf[off]))
				name := buf[off+int(unsafe.Offsetof(d.Name)) : off+int(d.Reclen)]
				name = name[:bytes.IndexByte(name, 0)]
				off += int(d.Reclen)
				if string(name) == "." || string(name) == ".." {
					continue
				}
				e := &dirent{dir: dir, name: string(name), typ: direntType(d.Type), ino: d.Ino}
				if d.Type == unix.DT_UNKNOWN {
					fi, err := e.Info()
					if errors.Is(err, fs.ErrNotExist) {
						continue // gone since: os.ReadDir skips it too
					}
					if err != nil {
						return nil, err
					}
					e.typ = fi.Mode().Type()
				}
				ents = append(ents, e)
			}
		}
		slices.SortFunc(ents, func(a, b *dirent) int { return strings.Compare(a.name, b.name) })
		entries := make([]fs.DirEntry, len(ents))
		var list []byte
		for i, e := range ents {
			entries[i] = e
			list = strconv.AppendUint(append(append(list, e.name...), 0), e.ino, 10)
			list = append(list, 0)
		}
		*stamps = append(*stamps, dirStamp{path: dir, dev: st.Dev, ino: st.Ino, entries: string(list)})
		return entries, nil
	}
}

// dirent is an entry that stampedList read.
type dirent struct {
	dir, name string
	typ       fs.FileMode
	ino       uint64
}

func (e *dirent) Name() string               { return e.name }
func (e *dirent) IsDir() bool                { return e.typ.IsDir() }
func (e *dirent) Type() fs.FileMode          { return e.typ }
func (e *dirent) Info() (fs.FileInfo, error) { return os.Lstat(filepath.Join(e.dir, e.name)) }

// direntType is the file type of a d_type.
func direntType(t uint8) fs.FileMode {
	switch t {
	case unix.DT_DIR:
		return fs.ModeDir
	case unix.DT_LNK:
		return fs.ModeSymlink
	case unix.DT_FIFO:
		return fs.ModeNamedPipe
	case unix.DT_SOCK:
		return fs.ModeSocket
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.DT_BLK:
		return fs.ModeDevice
	}
	return 0
}

// stampDir appends the stamp of dir itself, not following a symlink.
func stampDir(stamps *[]dirStamp, dir string) {
	var st unix.Stat_t
	if unix.Lstat(dir, &st) == nil {
		*stamps = append(*stamps, dirStamp{path: dir, dev: st.Dev, ino: st.Ino})
	}
}

// planStamped plans the ruleset of s as buildRuleset does, with the
// stamps of what the plan depends on: the split directories it listed and
// the files-only directories it names.
func planStamped(s *launchSpec, abi int) (rulesetPlan, []dirStamp) {
	var dirs []dirStamp
	plan := planRuleset(s.writable, s.reads, s.netOff, abi, stampedList(&dirs))
	for _, f := range s.reads.FilesOnly {
		stampDir(&dirs, f)
	}
	return plan, dirs
}

// prepareReadRules makes the ruleset of a call with reads g and netOff,
// with its read rules and no writable path, for the call to take. It
// changes nothing on disk.
func prepareReadRules(g readGrant, netOff bool) {
	abi, err := landlockABI()
	if err != nil {
		return
	}
	mounts, err := unix.Open("/proc/self/mounts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	plan, dirs := planStamped(&launchSpec{reads: g, netOff: netOff}, abi)
	rfd, err := newRuleset(plan, abi)
	if err != nil {
		unix.Close(mounts)
		return
	}
	ra := &rulesAhead
	ra.Lock()
	defer ra.Unlock()
	dropRulesAhead()
	ra.fd, ra.plan, ra.dirs, ra.mounts = rfd, plan, dirs, mounts
}

// takeRulesAhead returns the ruleset made ahead if it holds exactly the
// read rules (the first reads rules) of plan, and nothing has changed
// since that the plan was made from. Either way there is none after.
func takeRulesAhead(plan rulesetPlan, reads int, dirs []dirStamp) (int, bool) {
	ra := &rulesAhead
	ra.Lock()
	defer ra.Unlock()
	if ra.mounts < 0 {
		return -1, false
	}
	fd := ra.fd
	same := ra.plan.Handled == plan.Handled && ra.plan.HandledNet == plan.HandledNet && ra.plan.Scoped == plan.Scoped &&
		slices.Equal(ra.plan.Rules, plan.Rules[:reads]) && slices.Equal(ra.dirs, dirs) && !mountsChanged(ra.mounts)
	if same {
		ra.fd = -1
		ra.taken++
	}
	dropRulesAhead()
	return fd, same
}

// dropRulesAhead closes what was made ahead; ra is locked.
func dropRulesAhead() {
	ra := &rulesAhead
	if ra.mounts >= 0 {
		unix.Close(ra.mounts)
	}
	if ra.fd >= 0 {
		unix.Close(ra.fd)
	}
	ra.fd, ra.plan, ra.dirs, ra.mounts = -1, rulesetPlan{}, nil, -1
}

// mountsChanged reports whether the mount table of this namespace changed
// since fd (/proc/self/mounts) was opened, or cannot tell.
func mountsChanged(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
	n, err := unix.Poll(fds, 0)
	return err != nil || n != 0
}
