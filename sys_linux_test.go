package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
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

// TestTerminalHint: bashcall says on stderr that it reads a call from the
// terminal only when stdin is one (a pty here), not for /dev/null or
// another character device.
func TestTerminalHint(t *testing.T) {
	e := newTestEnv(t, "")
	const hint = "reading one call (JSON) from the terminal"
	for _, dev := range []string{os.DevNull, "/dev/zero"} {
		f, err := os.Open(dev)
		if err != nil {
			t.Fatal(err)
		}
		c := e.cmd("-text")
		c.Stdin = f
		out, _ := c.CombinedOutput()
		f.Close()
		if strings.Contains(string(out), hint) {
			t.Errorf("stdin %s: %q", dev, out)
		}
	}
	ptmx, slave := openPTY(t)
	pts, err := os.OpenFile(slave, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	c := e.cmd("-text")
	var stderr bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = pts, &stderr, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ptmx.WriteString(`{"name":"bash_list","arguments":{}}` + "\n\x04")
	go io.Copy(io.Discard, ptmx) // the terminal's echo
	if err := c.Wait(); err != nil || !strings.Contains(stderr.String(), hint) || !strings.Contains(stderr.String(), "(no background tasks)") {
		t.Errorf("stdin a terminal: %v, %q", err, stderr.String())
	}
}

// openPTY opens a pseudo-terminal's master, closed at the test's end, and
// names its slave; the test is skipped where there is none.
func openPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	return master, fmt.Sprintf("/dev/pts/%d", n)
}

// TestWaitChild: waitChild gives a child's exit status or signal, for a
// child that ends while it waits and for one already a zombie, through
// the pidfd and through the blocking wait4 of a kernel without one.
func TestWaitChild(t *testing.T) {
	t.Run("pidfd", func(t *testing.T) { testWaitChild(t, waitChild) })
	t.Run("wait4", func(t *testing.T) { testWaitChild(t, waitChildBlocking) })
}

func testWaitChild(t *testing.T, wait func(int) syscall.WaitStatus) {
	for _, c := range []struct {
		script string
		early  bool
		check  func(syscall.WaitStatus) bool
	}{
		{"sleep 0.05; exit 3", false, func(ws syscall.WaitStatus) bool { return ws.Exited() && ws.ExitStatus() == 3 }},
		{"exit 4", true, func(ws syscall.WaitStatus) bool { return ws.Exited() && ws.ExitStatus() == 4 }},
		{"sleep 0.05; kill -USR1 $$", false, func(ws syscall.WaitStatus) bool { return ws.Signaled() && ws.Signal() == syscall.SIGUSR1 }},
	} {
		pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", c.script}, &syscall.ProcAttr{})
		if err != nil {
			t.Fatal(err)
		}
		if c.early {
			waitFor(t, 5*time.Second, "the child to be a zombie", func() bool { return !pidAlive(pid) })
		}
		if ws := wait(pid); !c.check(ws) {
			t.Errorf("%q: wait status %v", c.script, ws)
		}
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("%q: the child is not reaped (kill: %v)", c.script, err)
		}
	}
}
