//go:build !linux

package main

// Where renameat2 is missing, a response is published with a hard link,
// which refuses an existing name too.

import "errors"

// renameNoReplace is renameat2's RENAME_NOREPLACE, which only Linux has;
// publish falls back to a hard link.
func renameNoReplace(string, string) error { return errors.ErrUnsupported }
