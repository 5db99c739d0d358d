package main

// Listing the directories a ruleset made ahead is planned from, with a
// stamp of each, and an inotify watch on each before it is read
// (rulesahead_linux.go says why).

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirStamp identifies a directory as a listing saw it: its device,
// inode and filesystem type; or, for a files-only directory, as it was
// stamped without a listing.
type dirStamp struct {
	path      string
	dev, ino  uint64
	fsType    int64
	watched   bool // listed with an inotify watch on it
	unlisted  bool // its listing failed: the plan grants nothing beneath
	absent    bool // unlisted, for it is not there or not a directory
	filesOnly bool
}

// watchMask is every change to a directory's entries, or to the directory
// itself; IN_IGNORED, IN_UNMOUNT and IN_Q_OVERFLOW come regardless.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ATTRIB |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// stampedList lists a directory as os.ReadDir does (sorted by name, a
// symlinked directory followed) and appends its stamp to stamps, an
// unlisted one if the listing fails; inos, when not nil, gets each
// entry's inode by path. It reads the entries itself: os.ReadDir keeps no
// inode numbers. With an inotify instance (notify >= 0), the directory is
// watched before it is read.
func stampedList(stamps *[]dirStamp, inos map[string]uint64, notify int) listDir {
	buf := make([]byte, 8<<10) // touched once per plan: a page fault costs
	return func(dir string) ([]fs.DirEntry, error) {
		entries, stamp, err := listStamped(dir, buf, inos, notify)
		if err != nil {
			stamp = dirStamp{path: dir, unlisted: true,
				absent: errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)}
		}
		*stamps = append(*stamps, stamp)
		return entries, err
	}
}

// listStamped is stampedList's listing of one directory, and its stamp.
func listStamped(dir string, buf []byte, inos map[string]uint64, notify int) ([]fs.DirEntry, dirStamp, error) {
	var none dirStamp
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, none, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	var sfs unix.Statfs_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, none, &fs.PathError{Op: "fstat", Path: dir, Err: err}
	}
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return nil, none, &fs.PathError{Op: "fstatfs", Path: dir, Err: err}
	}
	watched := false
	if notify >= 0 {
		_, err := unix.InotifyAddWatch(notify, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
		watched = err == nil
	}
	var ents []*dirent
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, none, &fs.PathError{Op: "getdents", Path: dir, Err: err}
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
					return nil, none, err
				}
				e.typ = fi.Mode().Type()
			}
			ents = append(ents, e)
		}
	}
	slices.SortFunc(ents, func(a, b *dirent) int { return strings.Compare(a.name, b.name) })
	entries := make([]fs.DirEntry, len(ents))
	for i, e := range ents {
		entries[i] = e
		if inos != nil {
			inos[filepath.Join(dir, e.name)] = e.ino
		}
	}
	return entries, dirStamp{path: dir, dev: st.Dev, ino: st.Ino, fsType: int64(sfs.Type), watched: watched}, nil
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
		*stamps = append(*stamps, dirStamp{path: dir, dev: st.Dev, ino: st.Ino, fsType: int64(sfs.Type), filesOnly: true})
	}
}
