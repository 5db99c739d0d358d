package main

import (
	"errors"
	"io"
)

func runServe(args []string, stdout, stderr io.Writer) error {
	return errors.New("serve: not built yet")
}
