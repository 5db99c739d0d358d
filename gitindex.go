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
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
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
	hashSize := indexHashSize(g)
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
	main, complete, err := readIndex(filepath.Join(g, "index"), hashSize, limit, add, nil)
	if err != nil || !complete || main.shared == "" {
		return paths, complete, err
	}
	// A split index: its entries of no name take, in order, the names of
	// the shared index's entries its replace bitmap names (git's
	// split-index.c). git dies where the two do not pair up.
	if len(main.replaced) != len(main.replacing) {
		return paths, false, fmt.Errorf("%q: %w", filepath.Join(g, "index"), errBadIndex)
	}
	gitlinkAt := map[int]bool{}
	for j, pos := range main.replaced {
		if main.replacing[j] {
			gitlinkAt[pos] = true
		}
	}
	named := func(pos int, name string) bool { return !gitlinkAt[pos] || add(name) }
	_, complete, err = readIndex(filepath.Join(g, "sharedindex."+main.shared), hashSize, limit, add, named)
	return paths, complete, err
}

// indexHashSize is the size of an object name in git dir g's index: 32
// where its repository's config (its common dir's, for a linked
// worktree's) says sha256, which git heeds from repository format version
// 1 on (the last value of each key counts); else 20.
func indexHashSize(g string) int {
	if c, ok := readGitFile(filepath.Join(g, "commondir"), ""); ok {
		g = c
	}
	version, format := "0", ""
	for _, v := range gitConfigValues(g, "core", "repositoryformatversion") {
		version = v
	}
	for _, f := range gitConfigValues(g, "extensions", "objectformat") {
		format = f
	}
	if n, err := strconv.Atoi(version); err == nil && n >= 1 && strings.EqualFold(format, "sha256") {
		return 32
	}
	return 20
}

// indexRead is what an index says besides its gitlinks: the shared index
// its link extension names, if any; whether each of its entries of no
// name (in a split index, those taking the name of a shared entry) is a
// gitlink; and the shared entries its replace bitmap names.
type indexRead struct {
	shared    string
	replacing []bool
	replaced  []int
}

// readIndex reads the index file p, calling add with each gitlink's path
// and named (if not nil) with every entry's position and path (false from
// either: no more). A missing file is an empty index.
func readIndex(p string, hashSize int, limit int64, add func(string) bool, named func(int, string) bool) (r indexRead, complete bool, err error) {
	f, err := openRegular(p)
	if errors.Is(err, fs.ErrNotExist) {
		return r, true, nil
	}
	if err != nil {
		return r, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return r, false, err
	}
	if fi.Size() > limit {
		return r, false, nil
	}
	w := &indexWindow{r: io.LimitReader(f, fi.Size()), size: fi.Size(), buf: make([]byte, min(fi.Size(), 1<<20))}
	bad := fmt.Errorf("%q: %w", p, errBadIndex)
	head := w.take(12)
	if head == nil || string(head[:4]) != "DIRC" {
		return r, false, bad
	}
	version, count := binary.BigEndian.Uint32(head[4:8]), binary.BigEndian.Uint32(head[8:12])
	if version < 2 || version > 4 {
		return r, false, bad
	}
	fixed := 40 + hashSize + 2 // stat data, object name, flags
	var prev []byte            // v4: the previous entry's path
	for i := uint32(0); i < count; i++ {
		// The entry whole, unless the file ends first.
		size, gitlink, name, ok := indexEntry(w.peek(fixed+2+10+maxIndexName+8), version, fixed, prev, i == 0)
		if !ok {
			return r, false, bad
		}
		if version == 4 {
			prev = name
		}
		w.skip(size)
		if len(name) == 0 {
			r.replacing = append(r.replacing, gitlink)
			continue
		}
		// git enters a gitlink's path as a C string: up to a NUL in it.
		path, _, _ := strings.Cut(string(name), "\x00")
		if gitlink && !add(path) || named != nil && !named(int(i), path) {
			return r, false, nil
		}
	}
	// The extensions, up to the trailing checksum: a split index names
	// its shared index in "link".
	for w.left() > int64(hashSize) {
		ext := w.take(8)
		if ext == nil {
			return r, false, bad
		}
		n := int64(binary.BigEndian.Uint32(ext[4:]))
		if n > w.left() {
			return r, false, bad
		}
		if string(ext[:4]) == "link" {
			// The shared index's name, then the delete and replace
			// bitmaps (EWAH).
			b := w.take(int(min(n, 16<<20)))
			if b == nil || len(b) < hashSize || int64(len(b)) < n {
				return r, false, bad
			}
			r.shared = hex.EncodeToString(b[:hashSize])
			if n > int64(hashSize) {
				_, used, ok := ewahBits(b[hashSize:], -1)
				var replaced []int
				if ok {
					replaced, _, ok = ewahBits(b[hashSize+used:], len(r.replacing)+1)
				}
				if !ok {
					return r, false, bad
				}
				r.replaced = replaced
			}
			continue
		}
		for ; n > 0; n -= 1 << 20 {
			if w.take(int(min(n, 1<<20))) == nil {
				return r, false, bad
			}
		}
	}
	return r, true, nil
}

// indexWindow reads an index of size bytes through a window of it in
// memory, of 1 MiB or the whole file.
type indexWindow struct {
	r        io.Reader
	size     int64
	buf      []byte
	off, end int
	read     int64 // bytes taken
}

// maxIndexName bounds one entry's path (git stores longer paths than a
// system call takes, and no more).
const maxIndexName = 64 << 10

// peek returns up to n bytes at the window's start, fewer only at the
// end of the file (or where it was cut while read).
func (w *indexWindow) peek(n int) []byte {
	n = int(min(int64(n), w.size-w.read))
	if w.end-w.off < n {
		copy(w.buf, w.buf[w.off:w.end])
		w.end -= w.off
		w.off = 0
		if n > len(w.buf) {
			w.buf = append(w.buf, make([]byte, n-len(w.buf))...)
		}
		for w.end < n {
			m, err := w.r.Read(w.buf[w.end:])
			w.end += m
			if err != nil {
				break
			}
		}
	}
	return w.buf[w.off:min(w.end, w.off+n)]
}

// take returns the next n bytes, or nil where the file has fewer.
func (w *indexWindow) take(n int) []byte {
	b := w.peek(n)
	if len(b) < n {
		return nil
	}
	w.skip(n)
	return b
}

func (w *indexWindow) skip(n int) {
	w.off += n
	w.read += int64(n)
}

// left is what the file holds past what was taken.
func (w *indexWindow) left() int64 { return w.size - w.read }

// ewahBits decodes a bitmap in git's EWAH serialization (ewah/ewah_io.c)
// at the start of b: the positions of its set bits, up to max of them
// (max below 0: none kept, the bitmap only taken), and the bytes it took.
// ok is false where b holds no such bitmap, or more set bits than max.
func ewahBits(b []byte, max int) (bits []int, used int, ok bool) {
	if len(b) < 8 {
		return nil, 0, false
	}
	words := int64(binary.BigEndian.Uint32(b[4:8]))
	if words > int64(len(b)-12)/8 {
		return nil, 0, false
	}
	used = 8 + 8*int(words) + 4
	pos := int64(0)
	for i := 0; i < int(words); {
		// A marker word: a run of words all of its bit, then words as
		// they are.
		w := binary.BigEndian.Uint64(b[8+8*i:])
		i++
		run, literal := int64(w>>1&0xffffffff)*64, int(w>>33)
		if w&1 != 0 && max >= 0 {
			for k := int64(0); k < run; k++ {
				if len(bits) == max {
					return nil, 0, false
				}
				bits = append(bits, int(pos+k))
			}
		}
		pos += run
		for ; literal > 0 && i < int(words); literal, i = literal-1, i+1 {
			lw := binary.BigEndian.Uint64(b[8+8*i:])
			for bit := 0; bit < 64; bit++ {
				if lw>>bit&1 != 0 && max >= 0 {
					if len(bits) == max {
						return nil, 0, false
					}
					bits = append(bits, int(pos)+bit)
				}
			}
			pos += 64
		}
	}
	return bits, used, true
}

// indexEntry reads the index entry at the start of b as git does
// (read-cache.c, create_from_disk), and returns its size, whether it is
// a gitlink, and its name: of the length its flags' 12 bits say, or, at
// 0xfff, up to its NUL; in version 4, after the part of the previous
// entry's name (prev) it keeps, but for the first entry's. ok is false
// where git would not read the entry as it is shaped.
func indexEntry(b []byte, version uint32, fixed int, prev []byte, first bool) (size int, gitlink bool, name []byte, ok bool) {
	if len(b) < fixed {
		return 0, false, nil, false
	}
	gitlink = binary.BigEndian.Uint32(b[24:28])>>12 == 0o16
	flags := binary.BigEndian.Uint16(b[fixed-2 : fixed])
	length, n := int(flags&0xfff), fixed
	if flags&0x4000 != 0 { // extended flags (version 3 and later)
		if version < 3 || len(b) < fixed+2 {
			return 0, false, nil, false
		}
		n += 2
	}
	if version < 4 {
		name, used := nameAt(b[n:], length)
		// Padded to a multiple of eight bytes, the name's NUL among them.
		size = (n + len(name) + 8) &^ 7
		return size, gitlink, name, used > 0 && size <= len(b)
	}
	strip, m := indexVarint(b[n:])
	if m == 0 || !first && strip > uint64(len(prev)) {
		return 0, false, nil, false
	}
	keep := 0
	if !first {
		keep = len(prev) - int(strip)
	}
	want := 0xfff // the rest up to its NUL
	if length != 0xfff {
		want = length - keep
	}
	suffix, used := nameAt(b[n+m:], want)
	if used == 0 {
		return 0, false, nil, false
	}
	return n + m + used, gitlink, append(prev[:keep], suffix...), true
}

// nameAt is the name at the start of b, of length bytes and followed by
// a NUL, or, where length is 0xfff, up to a NUL within maxIndexName
// bytes; used counts the NUL, 0 where there is none there. git copies a
// name with the byte after it and goes to a path as a C string: where
// that byte is no NUL, the path runs on past the name into whatever its
// memory holds, and no reading could say where it leads.
func nameAt(b []byte, length int) (name []byte, used int) {
	if length == 0xfff {
		i := bytes.IndexByte(b[:min(len(b), maxIndexName+1)], 0)
		if i < 0 {
			return nil, 0
		}
		return b[:i], i + 1
	}
	if length < 0 || length >= len(b) || b[length] != 0 {
		return nil, 0
	}
	return b[:length], length + 1
}

// indexVarint is git's offset encoding of a number (as in an ofs-delta)
// at the start of b, and its length; 0 where b holds none.
func indexVarint(b []byte) (v uint64, n int) {
	for i, c := range b[:min(len(b), 10)] {
		if i > 0 {
			v++
		}
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
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
