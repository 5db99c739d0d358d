package main

// Reading what the git guard reads, in places any session's command may
// have shaped: bounded, and never anything but a regular file or a
// directory. Among it the gitlinks of a git index (gitformat-index(5)):
// the paths that git status, diff and every command that recurses into
// submodules enter, running git there, whether or not .gitmodules names
// them. A command that can write the index (git add must work confined)
// can add one (git update-index --cacheinfo 160000,...) for any
// repository under the checkout, so the guard protects, and looks at
// after the call (gitnew.go), every repository a gitlink leads to as it
// does a submodule's.

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxIndexBytes bounds the index (and shared index) read in a place any
// session writes (/tmp, a writable root); maxOwnIndexBytes a workspace's
// own, whose size its repository's sets.
const (
	maxIndexBytes    = 64 << 20
	maxOwnIndexBytes = 1 << 30
)

// errBadIndex is an index that is not one git would read.
var errBadIndex = errors.New("not a git index")

// indexGitlinks lists the paths of the gitlinks (mode 160000) in git dir
// g's index, and in the shared index a split index names, up to max of
// them (complete false past that, or past limit bytes: those listed and
// no more). An index that is absent has none; one that cannot be read to
// its end is an error, with complete false (git may read further).
func indexGitlinks(g string, limit int64, max int) (paths []string, complete bool, err error) {
	hashSize := 20
	for _, f := range gitConfigValues(g, "extensions", "objectformat") {
		hashSize = 20 // git takes the last
		if strings.EqualFold(f, "sha256") {
			hashSize = 32
		}
	}
	seen := map[string]bool{}
	add := func(p string) bool {
		if seen[p] {
			return true
		}
		if len(paths) == max {
			return false
		}
		seen[p] = true
		paths = append(paths, p)
		return true
	}
	shared, complete, err := readIndex(filepath.Join(g, "index"), hashSize, limit, add)
	if err != nil || !complete || shared == "" {
		return paths, complete, err
	}
	_, complete, err = readIndex(filepath.Join(g, "sharedindex."+shared), hashSize, limit, add)
	return paths, complete, err
}

// readIndex reads the index file p, calling add with each gitlink's path
// (false: no more), and returns the name of the shared index its link
// extension names, if any. A missing file is an empty index.
func readIndex(p string, hashSize int, limit int64, add func(string) bool) (shared string, complete bool, err error) {
	f, err := openRegular(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", true, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	size := fi.Size()
	if size > limit {
		return "", false, nil
	}
	r := &indexReader{r: bufio.NewReaderSize(io.LimitReader(f, size), 64<<10), left: size}
	var head [12]byte
	r.read(head[:])
	version := binary.BigEndian.Uint32(head[4:8])
	if r.err != nil || string(head[:4]) != "DIRC" || version < 2 || version > 4 {
		return "", false, fmt.Errorf("%q: %w", p, errBadIndex)
	}
	count := binary.BigEndian.Uint32(head[8:12])
	fixed := 40 + hashSize + 2 // stat data, object name, flags
	entry := make([]byte, fixed+2)
	var prev []byte // v4: the previous entry's path
	for i := uint32(0); i < count && r.err == nil; i++ {
		r.read(entry[:fixed])
		flags := binary.BigEndian.Uint16(entry[fixed-2 : fixed])
		n := fixed
		if flags&0x4000 != 0 { // extended flags (v3 and later)
			if version < 3 {
				r.err = errBadIndex
				break
			}
			r.read(entry[fixed : fixed+2])
			n += 2
		}
		var name []byte
		if version == 4 {
			strip := r.varint()
			if strip > uint64(len(prev)) {
				r.err = errBadIndex
				break
			}
			name = append(prev[:len(prev)-int(strip)], r.upToNul()...)
			prev = name
		} else {
			name = r.upToNul()
			// Entries are padded with NULs to a multiple of eight bytes,
			// the name's own NUL among them.
			if pad := 8 - (n+len(name))%8; pad > 1 {
				r.skip(int64(pad - 1))
			}
		}
		mode := binary.BigEndian.Uint32(entry[24:28])
		if r.err == nil && mode>>12 == 0o16 && !add(string(name)) {
			return "", false, nil
		}
	}
	// The extensions, up to the trailing checksum: a split index names
	// its shared index in "link".
	for r.err == nil && r.left > int64(hashSize) {
		var ext [8]byte
		r.read(ext[:])
		n := int64(binary.BigEndian.Uint32(ext[4:]))
		if string(ext[:4]) == "link" && n >= int64(hashSize) {
			h := make([]byte, hashSize)
			r.read(h)
			shared, n = hex.EncodeToString(h), n-int64(hashSize)
		}
		r.skip(n)
	}
	if r.err != nil {
		return "", false, fmt.Errorf("%q: %w", p, errBadIndex)
	}
	return shared, true, nil
}

// indexReader reads an index, remembering its first error.
type indexReader struct {
	r    *bufio.Reader
	left int64 // bytes not read yet
	err  error
}

func (r *indexReader) read(b []byte) {
	if r.err != nil {
		return
	}
	_, r.err = io.ReadFull(r.r, b)
	r.left -= int64(len(b))
}

func (r *indexReader) skip(n int64) {
	if r.err != nil {
		return
	}
	if n < 0 || n > r.left {
		r.err = errBadIndex
		return
	}
	_, r.err = r.r.Discard(int(n))
	r.left -= n
}

// upToNul reads a NUL-terminated name (of at most 64 KiB: git stores
// longer paths than a system call takes, and no more), without its NUL.
func (r *indexReader) upToNul() []byte {
	if r.err != nil {
		return nil
	}
	var name []byte
	for {
		b, err := r.r.ReadByte()
		if err != nil {
			r.err = err
			return nil
		}
		r.left--
		if b == 0 {
			return name
		}
		if len(name) == 64<<10 {
			r.err = errBadIndex
			return nil
		}
		name = append(name, b)
	}
}

// varint reads git's offset encoding of a number (as in an ofs-delta).
func (r *indexReader) varint() uint64 {
	var v uint64
	for i := 0; r.err == nil; i++ {
		b, err := r.r.ReadByte()
		if err != nil {
			r.err = err
			return 0
		}
		r.left--
		if i > 0 {
			v++
		}
		v = v<<7 | uint64(b&0x7f)
		if b&0x80 == 0 {
			return v
		}
		if i == 8 {
			r.err = errBadIndex
		}
	}
	return 0
}

// withGitlinks adds the gitlinks of top's index to subs, the submodule
// paths its .gitmodules names, up to maxSubmodules paths in all
// (complete false past that). gitDirs are top's git dirs as planGitGuard
// has them: the index is the first one's (a linked worktree's own), or
// the top's own where the top is a git dir itself. An index git would not
// read has no gitlinks git would enter.
func withGitlinks(subs []string, top string, gitDirs []string, own bool) ([]string, bool) {
	g := ""
	for _, d := range gitDirs {
		if d == "weak:"+top || d != "" && !strings.HasPrefix(d, "weak:") {
			g = strings.TrimPrefix(d, "weak:")
			break
		}
	}
	if g == "" {
		return subs, true
	}
	limit := int64(maxIndexBytes)
	if own {
		limit = maxOwnIndexBytes
	}
	links, complete, _ := indexGitlinks(g, limit, maxSubmodules)
	seen := map[string]bool{}
	for _, s := range subs {
		seen[s] = true
	}
	for _, l := range links {
		p := filepath.Clean(l)
		if seen[p] || p == "." || filepath.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
			continue
		}
		if len(subs) == maxSubmodules {
			return subs, false
		}
		seen[p] = true
		subs = append(subs, p)
	}
	return subs, complete
}

// readDirBounded lists directory p (never anything else: a FIFO swapped
// in is not waited on), up to maxGuardEntries entries; more is
// errTooLarge, with none listed.
func readDirBounded(p string) ([]os.DirEntry, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readDirFile(f)
}

// readDirFile lists the open directory f as readDirBounded does.
func readDirFile(f *os.File) ([]os.DirEntry, error) {
	entries, err := f.ReadDir(maxGuardEntries + 1)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if len(entries) > maxGuardEntries {
		return nil, fmt.Errorf("%q: %w", f.Name(), errTooLarge)
	}
	return entries, err
}

// readSmallIn is readSmall of rel inside r, never outside it.
func readSmallIn(r *os.Root, rel string, limit int) ([]byte, error) {
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, limit)
}

// errTooLarge is a file over what readSmall may read.
var errTooLarge = errors.New("too large")

// readSmall reads p, a regular file of at most limit bytes (following a
// symlink, as git does). Anything else is not read, nor opened
// (openRegular): a device can act on being opened; the scan runs before
// every confined call and reads where any session's command can write (a
// FIFO there would hang every call, a sparse file of gigabytes cost each
// one its size).
func readSmall(p string, limit int) ([]byte, error) {
	f, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, limit)
}

// readRegular reads the open file f, a regular file of at most limit
// bytes.
func readRegular(f *os.File, limit int) ([]byte, error) {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%q is not a regular file", f.Name())
	case fi.Size() > int64(limit):
		return nil, fmt.Errorf("%q: %w", f.Name(), errTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err == nil && len(b) > limit { // it grew
		err = fmt.Errorf("%q: %w", f.Name(), errTooLarge)
	}
	return b, err
}
