package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadProcFile: readProcFile reads what os.ReadFile reads, files
// longer than its first buffer included, and reports a missing file as
// one.
func TestReadProcFile(t *testing.T) {
	long := filepath.Join(t.TempDir(), "long")
	data := make([]byte, 5000)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	if err := os.WriteFile(long, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/proc/sys/kernel/random/boot_id", "/proc/self/cmdline", long, "/dev/null"} {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readProcFile(p)
		if err != nil {
			t.Fatalf("readProcFile(%q): %v", p, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("readProcFile(%q) mismatch (-want +got):\n%s", p, d)
		}
	}
	if _, err := readProcFile("/proc/self/no-such-file"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("readProcFile(missing) = %v, want a not-exist error", err)
	}
}
