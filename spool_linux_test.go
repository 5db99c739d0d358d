package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSpoolFullDisk: on a full filesystem (a small tmpfs, mounted in a
// mount namespace of its own, so nothing outlives the test) a call that
// ran is answered with its real response once space returns, and the one
// worker goes on taking calls meanwhile.
func TestSpoolFullDisk(t *testing.T) {
	e := newTestEnv(t, "")
	small, pid := mountSmallTmpfs(t, e, "256k")
	view := fmt.Sprintf("/proc/%d/root%s", pid, small) // the tmpfs, as this process reaches it
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skip("needs nsenter to serve inside the mount namespace")
	}
	c := e.cmd("serve", "-spool", filepath.Join(small, "spool"), "-workers", "1")
	c.Path, c.Args = nsenter, append([]string{"nsenter", "-t", strconv.Itoa(pid), "-m", "-w", "--"}, c.Args...)
	s := e.startServe(c, filepath.Join(view, "spool"))
	spool := filepath.Join(view, "spool")
	b := []byte(`{"name":"bash","arguments":{"command":"echo b >> runs; echo answer-b","description":"d"}}`)
	if err := os.WriteFile(filepath.Join(spool, "tmp", "b.json"), b, 0o600); err != nil {
		t.Fatal(err) // written while there is space; renamed to new/ once there is none
	}
	drop(t, spool, "a.json", gatedCall("a"))
	e.awaitRuns("a\n")
	filler := filepath.Join(view, "filler")
	fill(t, filler)
	os.WriteFile(filepath.Join(e.workspace, "go"), nil, 0o600)
	if err := os.Rename(filepath.Join(spool, "tmp", "b.json"), filepath.Join(spool, "new", "b.json")); err != nil {
		t.Fatal(err)
	}
	e.awaitRuns("a\nb\n")
	time.Sleep(300 * time.Millisecond)
	for _, name := range []string{"a.json", "b.json"} {
		if _, err := os.Stat(filepath.Join(spool, "cur", name)); err != nil {
			t.Errorf("%s: no claim while the disk is full: %v", name, err)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if got := awaitResponse(t, spool, name+".json").text(); got != "answer-"+name+"\n" {
			t.Errorf("%s = %q", name, got)
		}
	}
	if err := s.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve exit: %v", err)
	}
	if !strings.Contains(s.stderr.String(), "no space left on device; retrying until it can be written") {
		t.Errorf("stderr = %q", s.stderr)
	}
}

// mountSmallTmpfs mounts a tmpfs of size in a new mount namespace, held
// by a process that dies with the test, and returns its mount point and
// the pid whose /proc/PID/root reaches it. The holder's directory is the
// workspace, so that "nsenter -w" starts a process there.
func mountSmallTmpfs(t *testing.T, e *testEnv, size string) (string, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small filesystem")
	}
	dir := filepath.Join(e.dir, "small")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("/bin/sh", "-c", `mount -t tmpfs -o size=$2,mode=0700 bashcall-test "$1" && echo mounted && exec sleep 600`, "sh", dir, size)
	holder.Dir = e.workspace
	holder.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Skipf("cannot make a mount namespace: %v", err)
	}
	t.Cleanup(func() {
		holder.Process.Kill()
		holder.Wait()
	})
	line := make([]byte, 8)
	if n, _ := io.ReadFull(out, line); string(line[:n]) != "mounted\n" {
		t.Skipf("cannot mount a tmpfs in a mount namespace")
	}
	return dir, holder.Process.Pid
}
