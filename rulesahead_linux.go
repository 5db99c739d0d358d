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
// A rule is bound to the inode it was opened at, and the ruleset holds a
// reference to it, so that its number is not reused while the ruleset
// exists: an entry replaced under its name since shows as another inode.
// For that to hold, each rule made ahead is checked to be on the inode
// the listing named (an entry replaced between the listing and the rule
// gives up the ruleset), and rulesets are made ahead only where every
// listed directory is on a filesystem whose inode numbers are unique on
// their device (ext4, xfs, tmpfs; not overlayfs, whose layers can share
// numbers, nor btrfs, whose subvolumes all have the same root inode,
// nor network filesystems). An entry on another device is a mount point,
// which the mount watch covers. Regular files get no rule ahead, only at
// the call: a held reference would keep a deleted file's blocks in use
// for as long as the child waits.

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

// dirStamp identifies a directory as a listing saw it: its device,
// inode and filesystem type, and each entry's name and inode.
type dirStamp struct {
	path     string
	dev, ino uint64
	fsType   int64
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
	later  []int // the read rules left to the call: regular files
	taken  int   // how many calls took one (for tests)
}{mounts: -1, fd: -1}

// stampedList lists a directory as os.ReadDir does (sorted by name, a
// symlinked directory followed) and appends its stamp to stamps; inos,
// when not nil, gets each entry's inode by path. It reads the entries
// itself: os.ReadDir keeps no inode numbers.
func stampedList(stamps *[]dirStamp, inos map[string]uint64) listDir {
	buf := make([]byte, 8<<10) // touched once per plan: a page fault costs
	return func(dir string) ([]fs.DirEntry, error) {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		var sfs unix.Statfs_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, &fs.PathError{Op: "fstat", Path: dir, Err: err}
		}
		if err := unix.Fstatfs(fd, &sfs); err != nil {
			return nil, &fs.PathError{Op: "fstatfs", Path: dir, Err: err}
		}
		var ents []*dirent
		for {
			n, err := unix.Getdents(fd, buf)
			if errors.Is(err, unix.EINTR) {
				continue
			}
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
				if d.Ino == 0 || string(name) == "." || string(name) == ".." {
					continue // ino 0: absent, as os.ReadDir has it
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
			if inos != nil {
				inos[filepath.Join(dir, e.name)] = e.ino
			}
		}
		*stamps = append(*stamps, dirStamp{path: dir, dev: st.Dev, ino: st.Ino, fsType: int64(sfs.Type), entries: string(list)})
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
	var sfs unix.Statfs_t
	if unix.Lstat(dir, &st) == nil && unix.Statfs(dir, &sfs) == nil {
		*stamps = append(*stamps, dirStamp{path: dir, dev: st.Dev, ino: st.Ino, fsType: int64(sfs.Type)})
	}
}

// planStamped plans the ruleset of s as buildRuleset does, with the
// stamps of what the plan depends on: the split directories it listed and
// the files-only directories it names.
func planStamped(s *launchSpec, abi int, inos map[string]uint64) (rulesetPlan, []dirStamp) {
	var dirs []dirStamp
	plan := planRuleset(s.writable, s.reads, s.netOff, abi, stampedList(&dirs, inos))
	for _, f := range s.reads.FilesOnly {
		stampDir(&dirs, f)
	}
	return plan, dirs
}

// stableInodes reports whether a filesystem's inode numbers are unique on
// its device and not reused while an inode is referenced.
func stableInodes(fsType int64) bool {
	switch fsType {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.TMPFS_MAGIC:
		return true
	}
	return false
}

// prepareReadRules makes the ruleset of a call with reads g and netOff,
// with its read rules but those on regular files and no writable path,
// for the call to take. It changes nothing on disk.
func prepareReadRules(g readGrant, netOff bool) {
	abi, err := landlockABI()
	if err != nil || !g.confined() {
		return
	}
	mounts, err := unix.Open("/proc/self/mounts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	inos := map[string]uint64{}
	plan, dirs := planStamped(&launchSpec{reads: g, netOff: netOff}, abi, inos)
	rfd, later, ok := makeAhead(plan, abi, dirs, inos)
	if !ok {
		unix.Close(mounts)
		return
	}
	ra := &rulesAhead
	ra.Lock()
	defer ra.Unlock()
	dropRulesAhead()
	ra.fd, ra.plan, ra.dirs, ra.later, ra.mounts = rfd, plan, dirs, later, mounts
}

// makeAhead creates the ruleset of plan with its rules on anything but
// regular files, each checked to be on the inode its listing named, and
// returns the indexes of the rules left for later. ok is false where
// that cannot be made to hold.
func makeAhead(plan rulesetPlan, abi int, dirs []dirStamp, inos map[string]uint64) (rfd int, later []int, ok bool) {
	byPath := map[string]dirStamp{}
	for _, d := range dirs {
		if !stableInodes(d.fsType) {
			return -1, nil, false
		}
		byPath[d.path] = d
	}
	rfd, err := newRuleset(rulesetPlan{Handled: plan.Handled, HandledNet: plan.HandledNet, Scoped: plan.Scoped}, abi)
	if err != nil {
		return -1, nil, false
	}
	for i, r := range plan.Rules {
		fd, st, err := openRulePath(r.Path)
		_, stamped := byPath[r.Path]
		if _, listed := inos[r.Path]; errors.Is(err, unix.ENOENT) && !listed && !stamped {
			continue // a files-only directory not there when stamped: a call skips it too
		}
		if err == nil {
			switch {
			case !listedAs(r.Path, &st, byPath, inos):
				err = unix.ESTALE // replaced since the listing
			case st.Mode&unix.S_IFMT == unix.S_IFREG:
				later = append(later, i)
			default:
				err = addRuleAt(rfd, fd, &st, r)
			}
			unix.Close(fd)
		}
		if err != nil {
			unix.Close(rfd)
			return -1, nil, false // gone since the listing, or unreadable
		}
	}
	return rfd, later, true
}

// listedAs reports whether st, of the rule path p, is what the listing
// saw: the files-only directory's inode (the only rule paths stamped
// themselves: a split directory gets no rule), or an entry's inode on its
// directory's device (an entry on another device is a mount point).
func listedAs(p string, st *unix.Stat_t, byPath map[string]dirStamp, inos map[string]uint64) bool {
	if d, ok := byPath[p]; ok {
		return st.Dev == d.dev && st.Ino == d.ino
	}
	d, ok := byPath[filepath.Dir(p)]
	ino, listed := inos[p]
	return ok && listed && (st.Dev != d.dev || st.Ino == ino)
}

// takeRulesAhead returns the ruleset made ahead and the indexes of the
// read rules still to add, if it holds exactly the read rules (the first
// reads rules) of plan, and nothing has changed since that the plan was
// made from. Either way there is none after.
func takeRulesAhead(plan rulesetPlan, reads int, dirs []dirStamp) (int, []int, bool) {
	ra := &rulesAhead
	ra.Lock()
	defer ra.Unlock()
	if ra.mounts < 0 {
		return -1, nil, false
	}
	fd, later := ra.fd, ra.later
	same := ra.plan.Handled == plan.Handled && ra.plan.HandledNet == plan.HandledNet && ra.plan.Scoped == plan.Scoped &&
		slices.Equal(ra.plan.Rules, plan.Rules[:reads]) && slices.Equal(ra.dirs, dirs) && !mountsChanged(ra.mounts)
	if same {
		ra.fd = -1
		ra.taken++
	}
	dropRulesAhead()
	return fd, later, same
}

// releaseRulesAhead lets go of a ruleset made ahead that the call does
// not take (an unconfined call, or one through the Go launcher), and of
// the inodes it holds.
func releaseRulesAhead() {
	rulesAhead.Lock()
	defer rulesAhead.Unlock()
	dropRulesAhead()
}

// dropRulesAhead closes what was made ahead; rulesAhead is locked.
func dropRulesAhead() {
	ra := &rulesAhead
	if ra.mounts >= 0 {
		unix.Close(ra.mounts)
	}
	if ra.fd >= 0 {
		unix.Close(ra.fd)
	}
	ra.fd, ra.plan, ra.dirs, ra.later, ra.mounts = -1, rulesetPlan{}, nil, nil, -1
}

// mountsChanged reports whether the mount table of this namespace changed
// since fd (/proc/self/mounts) was opened, or cannot tell.
func mountsChanged(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
	n, err := unix.Poll(fds, 0)
	return err != nil || n != 0
}
