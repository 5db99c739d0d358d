package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// waitOut runs bashcall wait and decodes what it printed.
func (e *testEnv) waitOut(args ...string) ([]string, time.Duration) {
	e.t.Helper()
	start := time.Now()
	r := e.run("", append([]string{"wait"}, args...)...)
	took := time.Since(start)
	if r.code != 0 || strings.Count(r.stdout, "\n") != 1 {
		e.t.Fatalf("wait %q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
	}
	var w waitResult
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || w.Notices == nil {
		e.t.Fatalf("wait printed %q: %v", r.stdout, err)
	}
	return w.Notices, took
}

func (e *testEnv) startBackground(command, session string) {
	e.t.Helper()
	r := e.call(sessionReq("bash", `{"command":`+jsonString(command)+`,"description":"d","run_in_background":true}`, session))
	if r.IsError || !strings.HasPrefix(r.text(), "started background task ") {
		e.t.Fatalf("start %q: %q", command, r.text())
	}
}

// TestWait: wait returns a session's completion notice as the task
// settles, consumes it (no later response carries it again), times out
// with an empty list, and is not woken by another session's tasks.
func TestWait(t *testing.T) {
	e := newTestEnv(t, "")
	e.startBackground("sleep 1", "A")
	got, took := e.waitOut("-session", "A", "-timeout", "10s")
	want := []string{"background bash task bash-1 finished completed, exit code: 0. Read its output with bash_output."}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("wait notices mismatch (-want +got):\n%s", d)
	}
	if took < 700*time.Millisecond || took > 4*time.Second {
		t.Errorf("wait took %v, want about 1s", took)
	}
	if r := e.call(sessionReq("bash_list", `{}`, "A")); len(r.Notices) != 0 {
		t.Errorf("a later call carries the notice again: %q", r.Notices)
	}

	got, took = e.waitOut("-session", "A", "-timeout", "300ms")
	if len(got) != 0 || took < 300*time.Millisecond {
		t.Errorf("timeout: notices %q after %v", got, took)
	}

	e.startBackground("sleep 0.3", "B")
	got, took = e.waitOut("-session", "A", "-timeout", "1500ms")
	if len(got) != 0 || took < 1500*time.Millisecond {
		t.Errorf("another session's task: notices %q after %v", got, took)
	}
	if r := e.call(sessionReq("bash_list", `{}`, "B")); len(r.Notices) != 1 {
		t.Errorf("session B lost its notice to a wait of A: %q", r.Notices)
	}
}

// TestWaitOrphan: a task whose supervisor is SIGKILLed still produces its
// notice, and promptly: the wait watches the supervisor's exit.
func TestWaitOrphan(t *testing.T) {
	e := newTestEnv(t, "")
	e.startBackground("sleep 60", "A")
	var sup procRecord
	waitFor(t, 10*time.Second, "supervisor.json", func() bool {
		return readJSON(filepath.Join(e.stateDir, "tasks", "bash-1", "supervisor.json"), &sup) == nil
	})
	done := make(chan []string, 1)
	go func() {
		got, _ := e.waitOut("-session", "A", "-timeout", "20s")
		done <- got
	}()
	time.Sleep(300 * time.Millisecond) // the wait is blocked by now
	start := time.Now()
	if err := signalProcess(sup.PID, sup.Start, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if len(got) != 1 || !strings.Contains(got[0], "bash-1 finished killed") || time.Since(start) > 3*time.Second {
		t.Errorf("orphan: notices %q after %v", got, time.Since(start))
	}
}

// TestWaitWakesOnNewTask: a task started after the wait began still
// wakes it when it settles.
func TestWaitWakesOnNewTask(t *testing.T) {
	e := newTestEnv(t, "")
	done := make(chan []string, 1)
	go func() {
		got, _ := e.waitOut("-session", "A", "-timeout", "20s")
		done <- got
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	e.startBackground("sleep 0.2", "A")
	got := <-done
	if len(got) != 1 || !strings.Contains(got[0], "bash-1 finished completed") || time.Since(start) > 4*time.Second {
		t.Errorf("new task: notices %q after %v", got, time.Since(start))
	}
}

// TestWaitUsage: bad flags are usage errors, not waits.
func TestWaitUsage(t *testing.T) {
	e := newTestEnv(t, "")
	for _, args := range [][]string{
		{"wait"},
		{"wait", "-session", ""},
		{"wait", "-session", "A", "-timeout", "soon"},
		{"wait", "-session", "A", "-timeout", "-1s"},
		{"wait", "-session", strings.Repeat("x", 257)},
		{"wait", "-session", "A", "extra"},
	} {
		if r := e.run("", args...); r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "bashcall -h") {
			t.Errorf("bashcall %.60q: exit %d, stdout %q, stderr %q; want 2", args, r.code, r.stdout, r.stderr)
		}
	}
}
