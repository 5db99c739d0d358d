package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalAtFork: a SIGTERM sent the moment a call's command exists
// (its process seen among bashcall's children) ends bashcall killed by
// it, having written nothing, or is answered as aborted; either way the
// command is gone at once, not left to the next call's sweep. A call
// listens for signals only from its command's fork (signals.go), so the
// first outcome is the one this test is after: the command then dies by
// its parent-death signal.
func TestSignalAtFork(t *testing.T) {
	if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d/children", os.Getpid())); err != nil {
		t.Skip("the kernel lists no children in /proc (CONFIG_PROC_CHILDREN):", err)
	}
	t.Run("unconfined", func(t *testing.T) { signalAtFork(t, newTestEnv(t, "")) })
	t.Run("confined", func(t *testing.T) { signalAtFork(t, newConfinedEnv(t, "")) })
}

func signalAtFork(t *testing.T, e *testEnv) {
	killed, aborted := 0, 0
	for i := 0; i < 40; i++ {
		c := e.cmd()
		stdin, out := startHeld(t, c)
		io.WriteString(stdin, bashReq("sleep 5", ""))
		stdin.Close()
		deadline := time.Now().Add(5 * time.Second)
		for !hasChild(c.Process.Pid) && time.Now().Before(deadline) {
		}
		c.Process.Signal(syscall.SIGTERM)
		ws := endOf(t, c)
		switch {
		case ws.Signaled() && ws.Signal() == syscall.SIGTERM && out.Len() == 0:
			killed++
		case ws.Exited() && ws.ExitStatus() == 0:
			if r := decodeResponse(t, out.String()); !r.IsError || r.text() != "Error: command aborted" {
				t.Errorf("round %d: answered %+v", i, r)
			}
			aborted++
		default:
			t.Errorf("round %d: ended with %v, having written %q", i, ws, out.String())
		}
		waitFor(t, 2*time.Second, "the round's command to be gone", func() bool { return len(procsInDir(e.workspace)) == 0 })
	}
	t.Logf("%d killed with their command just started, %d calls aborted", killed, aborted)
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
