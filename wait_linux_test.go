package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWaitCommandSupervisorKilled: bashcall wait, short of descriptors or
// not, answers a task whose supervisor was killed with -9 with its notice
// soon after, and does not spin meanwhile: a pidfd of a process that
// exited stays readable, and a watcher made again on each pass would be
// woken by it at once, over and over, while the task cannot be settled.
func TestWaitCommandSupervisorKilled(t *testing.T) {
	e := newTestEnv(t, "")
	for _, run := range []struct{ n, tasks int }{{11, 1}, {12, 1}, {13, 1}, {14, 1}, {16, 1}, {20, 1}, {0, 1}, {14, 6}, {15, 6}, {17, 6}, {0, 6}} {
		// With several tasks the watcher may run out of pidfds and poll.
		n := run.n
		session := fmt.Sprintf("W%d-%d", n, run.tasks)
		var id string
		for range run.tasks {
			id = e.start("sleep 60", session)
			defer e.call(killReq(id, session))
		}
		c := withDescriptors(e.cmd("wait", "-session", session, "-timeout", "8s"), n)
		var out, errOut strings.Builder
		c.Stdout, c.Stderr = &out, &errOut
		took := e.killSupervisorDuring(id, c)
		ru := c.ProcessState.SysUsage().(*syscall.Rusage)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		if c.ProcessState.ExitCode() == 1 && out.Len() == 0 && strings.HasPrefix(errOut.String(), "bashcall: error: wait: fewer than ") {
			continue // it says it cannot wait, at once
		}
		var w waitResult
		if err := json.Unmarshal([]byte(out.String()), &w); err != nil {
			t.Errorf("with %d descriptors, wait printed %q, stderr %q", n, out.String(), errOut.String())
		}
		want := textNotice(id, taskStatus{State: stateKilled})
		if len(w.Notices) != 1 || w.Notices[0] != want || took > 5*time.Second {
			t.Errorf("with %d descriptors and %d tasks, wait answered %q after %v, want [%q] soon after the supervisor died", n, run.tasks, w.Notices, took, want)
		}
		if cpu > time.Second {
			t.Errorf("with %d descriptors, wait spent %v of CPU in %v", n, cpu, took)
		}
		t.Logf("%d descriptors, %d tasks: answered in %v", n, run.tasks, took)
	}
}
