package main

// The spool directory itself (PROTOCOL.md section 9): whoever can write it
// can have calls run as the user serve runs as, with whatever approval they
// write into a call, so it is checked like the state dir, and so are the
// directories above it, before anything in it is read.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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
	abs, err := filepath.Abs(dir) // so that checkAncestors sees them all
	if err != nil {
		return "", fmt.Errorf("spool dir %q: %w", dir, err)
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("spool dir %q: %w", dir, err)
	}
	if err := checkOwnDir(canon, "spool dir", spoolChoose); err != nil {
		return "", err
	}
	if err := checkAncestors(canon); err != nil {
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
	return checkOwnDir(p, "spool dir", spoolChoose)
}

// checkAncestors refuses a spool dir that another user could rename away
// and replace with one of theirs: each directory above it must belong to
// this user or root, and be writable by nobody else unless it is sticky
// (like /tmp, where only an entry's owner may rename it).
func checkAncestors(dir string) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("spool dir %q: %w", dir, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
			return &hintError{fmt.Errorf("spool dir %q is inside %q, which is owned by uid %d, who could replace it", dir, p, st.Uid),
				fmt.Sprintf("use a spool dir in a directory of your own with %s", spoolChoose)}
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
			return &hintError{fmt.Errorf("spool dir %q is inside %q, which other users can write (mode %04o), so they could replace it", dir, p, fi.Mode().Perm()),
				fmt.Sprintf("chmod go-w %q, or use a spool dir elsewhere with %s", p, spoolChoose)}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
