//go:build !linux

package main

import "errors"

// renameNoReplace is renameat2's RENAME_NOREPLACE, which only Linux has;
// publish falls back to a hard link.
func renameNoReplace(string, string) error { return errors.ErrUnsupported }
