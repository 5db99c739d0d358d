package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
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
	for _, n := range []int{11, 12, 13, 14, 16, 20, 0} {
		session := fmt.Sprintf("W%d", n)
		id := e.start("sleep 60", session)
		var sup procRecord
		waitFor(t, 10*time.Second, "the supervisor's record", func() bool {
			return readJSON(filepath.Join(e.stateDir, "tasks", id, "supervisor.json"), &sup) == nil && sup.PID > 0
		})
		c := e.cmd("wait", "-session", session, "-timeout", "8s")
		if n > 0 {
			c.Args = append([]string{"bash", "-c", fmt.Sprintf(`ulimit -n %d; exec "$0" "$@"`, n), c.Path}, c.Args[1:]...)
			c.Path = "/bin/bash"
		}
		var out, errOut strings.Builder
		c.Stdout, c.Stderr = &out, &errOut
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		syscall.Kill(sup.PID, syscall.SIGKILL)
		start := time.Now()
		c.Wait()
		took := time.Since(start)
		ru := c.ProcessState.SysUsage().(*syscall.Rusage)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		if c.ProcessState.ExitCode() == 1 && out.Len() == 0 && strings.HasPrefix(errOut.String(), "bashcall: error: wait: fewer than ") {
			e.call(killReq(id, session))
			continue // it says it cannot wait, at once
		}
		var w waitResult
		if err := json.Unmarshal([]byte(out.String()), &w); err != nil {
			t.Errorf("with %d descriptors, wait printed %q, stderr %q", n, out.String(), errOut.String())
		}
		want := textNotice(id, taskStatus{State: stateKilled})
		if len(w.Notices) != 1 || w.Notices[0] != want || took > 5*time.Second {
			t.Errorf("with %d descriptors, wait answered %q after %v, want [%q] soon after the supervisor died", n, w.Notices, took, want)
		}
		if cpu > time.Second {
			t.Errorf("with %d descriptors, wait spent %v of CPU in %v", n, cpu, took)
		}
		e.call(killReq(id, session))
	}
}
