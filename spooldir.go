package main

// The spool directory itself (PROTOCOL.md section 9): whoever can write it
// can have calls run as the user serve runs as, with whatever approval they
// write into a call, so it is checked like the state dir, and so are the
// directories above it, before anything in it is read.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// spoolSubdirs are the directories of the spool protocol.
var spoolSubdirs = []string{"tmp", "new", "cur", "out"}

// spoolChoose is how the user names another spool dir, for hints.
const spoolChoose = "serve -spool"

// prepareSpool checks the spool dir (creating it and its subdirectories,
// 0700, when missing), removes the temporaries a killed serve left in out/
// and returns the canonical path.
func prepareSpool(dir string) (string, error) {
	abs, canon, err := makeOwnDir(dir, "spool dir", spoolChoose)
	if err != nil {
		return "", err
	}
	// Nothing is changed, closeUp's chmod included, before the path is
	// known to be the user's own.
	if err := checkAncestry(abs, canon, true, "spool dir", spoolChoose); err != nil {
		return "", err
	}
	closeUp(canon)
	if err := checkOwnDir(canon, "spool dir", spoolChoose); err != nil {
		return "", err
	}
	for _, sub := range spoolSubdirs {
		if err := prepareSubdir(filepath.Join(canon, sub)); err != nil {
			return "", err
		}
	}
	removeStaleTemps(filepath.Join(canon, "out"))
	return canon, nil
}

// prepareSubdir creates a spool subdirectory or checks the one there: a
// symbolic link or a directory open to others would let the calls or the
// responses live somewhere other users reach.
func prepareSubdir(p string) error {
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("spool dir %q: %w", p, err)
	}
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return &hintError{fmt.Errorf("spool dir %q is a symbolic link", p),
			fmt.Sprintf("remove it, or use a spool dir of your own with %s", spoolChoose)}
	}
	closeUp(p)
	return checkOwnDir(p, "spool dir", spoolChoose)
}

// closeUp makes a spool directory of ours that others may read but not
// write (a plain mkdir's 0755) private, saying so on stderr: a client's
// call in cur/ holds its session id, which is its owner token. One that
// others may write is left to checkOwnDir to refuse.
func closeUp(p string) {
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() || !ownedByMe(fi) || fi.Mode().Perm()&0o022 != 0 || fi.Mode().Perm() == 0o700 {
		return
	}
	if os.Chmod(p, 0o700) == nil {
		warnf("bashcall serve: made %q private (mode 0700; it was %04o)", p, fi.Mode().Perm())
	}
}

// spoolList is a state dir's list of the spool dirs serve answered calls
// in, a spoolEntry a line: every bashcall process on that state dir
// withholds them from its confined commands and refuses to make them
// writable, whichever process's calls they are (ownDirs).
func spoolList(stateDir string) string { return filepath.Join(stateDir, "spools") }

// spoolEntry is a listed spool dir and the directory it was, by device,
// inode and birth time (a removed directory's inode number is soon given
// to the next one; birth times tick at the kernel's clock tick, a few
// ms): a path removed and made again is not a spool dir any more, and is
// neither withheld nor protected. (Removing a spool dir needs write
// access to its parent, which serve refuses to share with confined calls:
// this keeps a stale entry from refusing calls, it is no barrier.)
type spoolEntry struct {
	Path  string `json:"path"`
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Birth int64  `json:"birth"` // ns; 0 where the filesystem keeps none
}

// current reports whether the entry's path is still the directory listed.
func (e spoolEntry) current() bool {
	now, err := spoolEntryOf(e.Path)
	return err == nil && now == e
}

// spoolEntryOf is the entry of the directory at p.
func spoolEntryOf(p string) (spoolEntry, error) {
	dev, ino, birth, err := fileIdentity(p)
	return spoolEntry{Path: p, Dev: dev, Ino: ino, Birth: birth}, err
}

// listedSpools are the entries of the list at p that are still current.
// A line that is a path alone (as an earlier release wrote them) stands
// for the directory there now. The list is written whole by a rename, so
// a line that is neither is damage, and refuses: withholding less than
// the list says would open the spool dirs it names.
func listedSpools(p string) ([]spoolEntry, error) {
	data, err := readPrivate(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var out []spoolEntry
	for _, line := range strings.Split(string(data), "\n") {
		var e spoolEntry
		var path string
		switch {
		case line == "":
		case json.Unmarshal([]byte(line), &e) == nil && filepath.IsAbs(e.Path):
			if e.current() {
				out = append(out, e)
			}
		case json.Unmarshal([]byte(line), &path) == nil && filepath.IsAbs(path):
			if now, err := spoolEntryOf(path); err == nil {
				out = append(out, now)
			}
		default:
			return nil, fmt.Errorf("%q holds a line that names no spool dir: %.80q", p, line)
		}
	}
	return out, nil
}

// listSpool refuses a spool dir that a confined call would make writable
// (/tmp, [sandbox] writable_roots, a listed workspace, a path an earlier
// confined call made writable), whatever this configuration's own mode,
// then records it in the spool lists of the state dir in use and of the
// default state dir (where the calls of a host on a state dir of its own
// look too).
func (inv *invocation) listSpool(spool string) error {
	written, err := inv.writtenPaths()
	if err != nil {
		return err
	}
	writable := append([]string{canonicalOr("/tmp")}, written...)
	for _, r := range inv.cfg.Sandbox.WritableRoots {
		writable = append(writable, canonicalOr(r))
	}
	for _, w := range append(writable, inv.listedWorkspaces()...) {
		if within(spool, w) || within(w, spool) {
			return &hintError{fmt.Errorf("spool dir %q overlaps %q, which confined calls can write", spool, w),
				fmt.Sprintf("use a spool dir outside /tmp, the workspaces and [sandbox] writable_roots with %s", spoolChoose)}
		}
	}
	entry, err := spoolEntryOf(spool)
	if err != nil {
		return fmt.Errorf("spool dir %q: %w", spool, err)
	}
	dirs := []string{inv.stateDir}
	if def := defaultStateDir(inv.getenv); def != "" && canonicalPrefix(def) != inv.stateDir {
		if d, err := openStateDir(def); err == nil {
			dirs = append(dirs, d)
		} else {
			warnf("bashcall serve: cannot list the spool dir in the default state dir (%v); calls on other state dirs do not withhold it", err)
		}
	}
	for _, d := range dirs {
		if err := addSpool(spoolList(d), entry); err != nil {
			return fmt.Errorf("listing the spool dir in %q: %w", d, err)
		}
	}
	return nil
}

// addSpool rewrites the list at list with entry and the entries still
// current, under the list's lock: one that was removed since drops out.
func addSpool(list string, entry spoolEntry) error {
	unlock, err := lockFile(list + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	listed, err := listedSpools(list)
	if err != nil {
		return err
	}
	if slices.Contains(listed, entry) {
		return nil
	}
	var b []byte
	for _, e := range append(listed, entry) {
		line, _ := json.Marshal(e)
		b = append(append(b, line...), '\n')
	}
	return writeFileAtomic(list, b)
}
