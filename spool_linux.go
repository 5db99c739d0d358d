package main

// The spool's one Linux system call: a rename that never replaces an
// existing response.

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames oldpath to newpath unless newpath exists
// (os.ErrExist), with renameat2(2) RENAME_NOREPLACE; errors.ErrUnsupported
// when the kernel or the filesystem cannot.
// https://man7.org/linux/man-pages/man2/rename.2.html
func renameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	if err == unix.EINVAL || err == unix.ENOSYS {
		return errors.ErrUnsupported
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}
