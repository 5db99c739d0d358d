//go:build !linux

package main

// Landlock exists only on Linux. Elsewhere every confined mode fails closed
// with the sandbox-unavailable error; only danger-full-access runs.

import "errors"

// landlockABI reports that no Landlock is available.
func landlockABI() (int, error) {
	return 0, errors.New("landlock is only supported on Linux")
}

// runLauncher refuses: there is nothing to confine a command with.
func runLauncher(args []string) error {
	return errors.New("the sandbox launcher is only supported on Linux")
}
