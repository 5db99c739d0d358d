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

// TestSignalAtFork: a SIGTERM sent the moment a call's command exists
// (its process seen among bashcall's children), or a few milliseconds
// later, when the shell may have started a child of its own, aborts the
// call: answered as aborted, with nothing of the command left running,
// not left to the next call's sweep. A call is armed, and listens, before
// its command's fork.
func TestSignalAtFork(t *testing.T) {
	if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d/children", os.Getpid())); err != nil {
		t.Skip("the kernel lists no children in /proc (CONFIG_PROC_CHILDREN):", err)
	}
	t.Run("unconfined", func(t *testing.T) { signalAtFork(t, newTestEnv(t, "")) })
	t.Run("confined", func(t *testing.T) { signalAtFork(t, newConfinedEnv(t, "")) })
	t.Run("snapshot", func(t *testing.T) {
		e := newConfinedEnv(t, "")
		e.extraEnv = append(e.extraEnv, "BASHCALL_PROTECT=snapshot")
		signalAtFork(t, e)
	})
}

func signalAtFork(t *testing.T, e *testEnv) {
	defer killInDir(e.workspace)
	for i := 0; i < 25; i++ {
		c := e.cmd()
		stdin, out := startHeld(t, c)
		io.WriteString(stdin, bashReq("sleep 1000 & exec sleep 1000", ""))
		stdin.Close()
		deadline := time.Now().Add(5 * time.Second)
		for !hasChild(c.Process.Pid) && time.Now().Before(deadline) {
		}
		after := []time.Duration{0, 300 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}[i%5]
		for start := time.Now(); time.Since(start) < after; {
		}
		c.Process.Signal(syscall.SIGTERM)
		if ws := endOf(t, c); !ws.Exited() || ws.ExitStatus() != 0 {
			t.Errorf("round %d (%v after the fork): ended with %v, having written %q", i, after, ws, out.String())
		} else if r := decodeResponse(t, out.String()); !r.IsError || r.text() != "Error: command aborted" {
			t.Errorf("round %d (%v after the fork): answered %+v", i, after, r)
		}
		if left := procsInDir(e.workspace); len(left) != 0 {
			t.Fatalf("round %d (%v after the fork): left running: %q", i, after, left)
		}
	}
}

// hasChild says whether any thread of pid has a child.
func hasChild(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, p := range tasks {
		if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != "" {
			return true
		}
	}
	return false
}

// TestIgnoredSIGINTNotInherited: a SIGINT ignored since bashcall started
// is caught by the time the command starts, so that the command gets it
// as the default again: a command started with SIGINT ignored could
// neither trap it nor be interrupted by it.
func TestIgnoredSIGINTNotInherited(t *testing.T) {
	e := newTestEnv(t, "")
	bc := e.cmd()
	c := exec.Command("bash", append([]string{"-c", `trap "" INT; exec "$0" "$@"`}, bc.Args...)...)
	c.Dir, c.Env = bc.Dir, bc.Env
	c.Stdin = strings.NewReader(bashReq("grep ^SigIgn: /proc/self/status", ""))
	b, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	text := decodeResponse(t, string(b)).text()
	mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(text, "SigIgn:")), 16, 64)
	if err != nil {
		t.Fatalf("the command said %q", text)
	}
	if mask&(1<<(syscall.SIGINT-1)) != 0 {
		t.Errorf("the command started with SIGINT ignored (SigIgn %016x)", mask)
	}
}
