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
	return checkOwnDir(p, "spool dir", spoolChoose)
}
