package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBoundedTaskOutput: a task printing without end keeps a bounded tail
// on disk and never fills it.
func TestBoundedTaskOutput(t *testing.T) {
	e := newTestEnv(t, "max_output_bytes = 1000\nmax_spill_bytes = 100000\n")
	id := e.start("yes bashcall", "A")
	dir := filepath.Join(e.stateDir, "tasks", id)
	waitFor(t, 30*time.Second, "20 MB of output", func() bool {
		f, err := os.Open(filepath.Join(dir, "stdout.tail"))
		if err != nil {
			return false
		}
		defer f.Close()
		total, _ := readTailHeader(f)
		return total > 20<<20
	})
	var size int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
		return nil
	})
	if size > 100000+3000+4096 {
		t.Errorf("the task's directory holds %d bytes after 20 MB of output", size)
	}
	r := e.call(outputReq(id, "A", ""))
	if !strings.Contains(r.text(), markerDropped(textUnavailable)) {
		t.Errorf("read = %q", r.text()[max(0, len(r.text())-200):])
	}
}

// TestPrivateState: every directory under the state dir is 0700 and every
// file 0600.
func TestPrivateState(t *testing.T) {
	e := newTestEnv(t, "max_output_bytes = 10\n")
	e.start("seq 1 100", "A")
	e.waitDone("bash-1", "A")
	e.call(bashReq("seq 1 100", ""))
	e.run("", "mode", "-session", "A", "read-only")
	filepath.WalkDir(e.stateDir, func(p string, d fs.DirEntry, _ error) error {
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		want := fs.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want || fi.Mode()&fs.ModeSymlink != 0 {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
		return nil
	})
}

// TestGC: gc removes settled tasks and spill files older than the
// retention, never a running task.
func TestGC(t *testing.T) {
	e := newTestEnv(t, "max_output_bytes = 10\n")
	done := e.start("true", "A")
	e.waitDone(done, "A")
	running := e.start("sleep 300", "A")
	e.call(bashReq("seq 1 100", ""))
	if r := e.run("", "gc"); r.stdout != "removed 0 finished tasks and 0 spill files\n" {
		t.Errorf("gc with the default retention: %q %s", r.stdout, r.stderr)
	}
	time.Sleep(50 * time.Millisecond)
	// The spill files: the foreground call's and the finished task's two
	// complete copies (a running task's are live and kept).
	if r := e.run("", "gc", "-older-than", "1ms"); r.stdout != "removed 1 finished tasks and 3 spill files\n" {
		t.Errorf("gc: %q %s", r.stdout, r.stderr)
	}
	if got := e.call(sessionReq("bash_list", "{}", "A")).text(); got != running+" running — sleep 300" {
		t.Errorf("list after gc = %q", got)
	}
	if r := e.run("", "gc", "-older-than", "soon"); r.code != 2 {
		t.Errorf("bad duration: exit %d", r.code)
	}
}
