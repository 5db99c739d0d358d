package main

// The spool directory itself (PROTOCOL.md section 9): whoever can write it
// can have calls run as the user serve runs as, with whatever approval they
// write into a call, so it is checked like the state dir, and so are the
// directories above it, before anything in it is read.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// spoolSubdirs are the directories of the spool protocol.
var spoolSubdirs = []string{"tmp", "new", "cur", "out"}

// spoolChoose is how the user names another spool dir, for hints.
const spoolChoose = "serve -spool"

// prepareSpool checks the spool dir (creating it and its subdirectories,
// 0700, when missing), removes the temporaries a killed serve left in out/
// and returns the canonical path.
func prepareSpool(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("spool dir %q: %w", dir, err)
	}
	abs, err := filepath.Abs(dir) // so that checkAncestry sees them all
	if err != nil {
		return "", fmt.Errorf("spool dir %q: %w", dir, err)
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("spool dir %q: %w", dir, err)
	}
	closeUp(canon)
	if err := checkOwnDir(canon, "spool dir", spoolChoose); err != nil {
		return "", err
	}
	if err := checkAncestry(abs, canon, "spool dir", spoolChoose); err != nil {
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
// in, a JSON string a line: every bashcall process on that state dir
// withholds them from its confined commands and refuses to make them
// writable, whichever process's calls they are (ownDirs).
func spoolList(stateDir string) string { return filepath.Join(stateDir, "spools") }

// listSpool refuses a spool dir that a confined call of this
// configuration would make writable, then records it in the spool lists
// of the state dir in use and of the default state dir (where the calls
// of a host on a state dir of its own look too).
func (inv *invocation) listSpool(spool string) error {
	if inv.sandboxes() {
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
		if err := addPath(spoolList(d), spool); err != nil {
			return fmt.Errorf("listing the spool dir in %q: %w", d, err)
		}
	}
	return nil
}

// addPath adds p to the list at list unless it is there, under the
// list's lock.
func addPath(list, p string) error {
	unlock, err := lockFile(list + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	data, err := readPrivate(list)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if slices.Contains(decodePaths(data), p) {
		return nil
	}
	return appendPaths(list, []string{p})
}
