package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestStaticBinary: a plain "go build" makes one static binary (no
// program interpreter, no shared libraries), so that it can be dropped
// into a minimal container as the README says. Importing a package that
// links the C library where cgo is available (os/user, net) breaks this.
func TestStaticBinary(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the ELF check is for Linux builds")
	}
	bin := filepath.Join(t.TempDir(), "bashcall")
	c := exec.Command("go", "build", "-o", bin, ".")
	c.Env = os.Environ() // CGO_ENABLED as the user has it: usually 1
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a program interpreter: it is dynamically linked")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary links %v", libs)
	}
}
