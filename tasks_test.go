package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func startReq(command, session string) string {
	return sessionReq("bash", `{"command":`+jsonString(command)+`,"description":"Run in the background","run_in_background":true}`, session)
}

func outputReq(id, session, extra string) string {
	args := `{"task_id":` + jsonString(id)
	if extra != "" {
		args += "," + extra
	}
	return sessionReq("bash_output", args+"}", session)
}

// killReq is a bash_kill request of session.
func killReq(id, session string) string {
	return sessionReq("bash_kill", `{"task_id":`+jsonString(id)+`}`, session)
}

// statusLine is the status marker every bash_output text ends with.
func statusLine(s taskStatus) string {
	return strings.TrimPrefix(renderTaskRead(&taskRead{Status: s}, false), textNoNewOutput+"\n")
}

// noNewOutput is the whole text of a read that found nothing new.
func noNewOutput(s taskStatus) string { return renderTaskRead(&taskRead{Status: s}, false) }

// start starts a background task and returns its id.
func (e *testEnv) start(command, session string) string {
	e.t.Helper()
	r := e.call(startReq(command, session))
	id, ok := strings.CutPrefix(r.text(), textStarted(""))
	if r.IsError || !ok {
		e.t.Fatalf("start %q: %s", command, r.text())
	}
	return id
}

// waitDone waits until the task has settled and returns the last read.
func (e *testEnv) waitDone(id, session string) wireResponse {
	e.t.Helper()
	r := e.call(outputReq(id, session, `"wait":true,"timeout_ms":30000`))
	if strings.HasSuffix(r.text(), statusLine(taskStatus{State: stateRunning})) {
		e.t.Fatalf("task %s still running: %s", id, r.text())
	}
	return r
}

// TestTaskTexts: goldens for the texts of the task tools.
func TestTaskTexts(t *testing.T) {
	e := newTestEnv(t, "grace_ms = 300\n")
	golden(t, "list_empty", e.call(sessionReq("bash_list", "{}", "A")).text())
	golden(t, "start", e.call(startReq("echo out; echo err >&2; exit 3", "A")).text())
	golden(t, "completed", e.waitDone("bash-1", "A").text())
	golden(t, "no_new_output", e.call(outputReq("bash-1", "A", "")).text())
	id := e.start("printf 'partial'; sleep 30", "A")
	waitFor(t, 10*time.Second, "output", func() bool {
		return fileSize(e.taskFull(id, "stdout")) == 7
	})
	golden(t, "running", e.call(outputReq(id, "A", "")).text())
	golden(t, "kill", e.call(sessionReq("bash_kill", `{"task_id":"bash-2"}`, "A")).text())
	golden(t, "killed", e.call(outputReq(id, "A", "")).text())
	golden(t, "already_finished", e.call(sessionReq("bash_kill", `{"task_id":"bash-2"}`, "A")).text())
	e.start("kill -TERM $$", "A")
	golden(t, "killed_by_signal", e.waitDone("bash-3", "A").text())
	golden(t, "list", e.call(sessionReq("bash_list", "{}", "A")).text())
	golden(t, "other_session", e.call(outputReq("bash-1", "B", "")).text())
	golden(t, "no_session", e.call(`{"name":"bash_kill","arguments":{"task_id":"bash-1"}}`).text())
	e.start("sleep 0.1", "A") // settles after its start has answered
	e.awaitSettled("bash-4")
	r := e.call(sessionReq("bash_list", "{}", "A"))
	golden(t, "notice", strings.Join(r.Notices, "\n"))
}

// awaitSettled waits, without reading it, until a task has settled.
func (e *testEnv) awaitSettled(id string) {
	e.t.Helper()
	waitFor(e.t, 10*time.Second, id+" to settle", func() bool {
		return fileSize(filepath.Join(e.stateDir, "tasks", id, "status.json")) > 0
	})
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// TestParallelStarts: 20 parallel starts get 20 distinct ids.
func TestParallelStarts(t *testing.T) {
	e := newTestEnv(t, "[background]\nmax_tasks_per_session = 100\n")
	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.run(startReq("true", fmt.Sprintf("s%d", i%3)))
			w := decodeResponse(t, r.stdout)
			mu.Lock()
			ids[w.text()] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(ids) != 20 {
		t.Errorf("got %d distinct answers, want 20: %v", len(ids), ids)
	}
	for i := 1; i <= 20; i++ {
		if !ids[textStarted(fmt.Sprintf("bash-%d", i))] {
			t.Errorf("bash-%d was not handed out: %v", i, ids)
		}
	}
}

// TestConcurrentReaders: four concurrent readers of a task printing
// thousands of lines receive every line exactly once, between them.
func TestConcurrentReaders(t *testing.T) {
	e := newTestEnv(t, "")
	const lines = 5000
	id := e.start(fmt.Sprintf("for i in $(seq 1 %d); do echo line-$i; done", lines), "A")
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				w := e.call(outputReq(id, "A", ""))
				var got taskOutputResult
				json.Unmarshal(w.StructuredContent, &got)
				if got.Lossy {
					t.Errorf("lossy read: %s", w.text())
				}
				mu.Lock()
				for _, l := range strings.Split(got.Stdout, "\n") {
					if l != "" {
						seen[l]++
					}
				}
				mu.Unlock()
				if got.Status != stateRunning {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != lines {
		t.Errorf("got %d distinct lines, want %d", len(seen), lines)
	}
	for l, n := range seen {
		if n != 1 || !strings.HasPrefix(l, "line-") {
			t.Errorf("line %q delivered %d times", l, n)
		}
	}
}

// TestKillTree: bash_kill stops a tree with a setsid escapee and a
// TERM-ignoring shell, SIGKILL after the grace.
func TestKillTree(t *testing.T) {
	e := newTestEnv(t, "grace_ms = 500\n")
	pidFile := filepath.Join(e.workspace, "pids")
	id := e.start(`trap '' TERM; setsid sleep 300 & echo "$! $$" > pids; sleep 300`, "A")
	pids := readPIDs(t, pidFile)
	start := time.Now()
	if got := e.call(sessionReq("bash_kill", `{"task_id":`+jsonString(id)+`}`, "A")).text(); got != textKilled(id) {
		t.Errorf("kill = %q", got)
	}
	if took := time.Since(start); took < 500*time.Millisecond || took > 8*time.Second {
		t.Errorf("bash_kill took %v; want about grace_ms", took)
	}
	if got := e.call(outputReq(id, "A", "")).text(); got != noNewOutput(taskStatus{State: stateKilled, Signal: "SIGKILL"}) {
		t.Errorf("status = %q", got)
	}
	for _, pid := range pids {
		if pidAlive(pid) {
			t.Errorf("pid %d survived bash_kill", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if n := e.call(sessionReq("bash_list", "{}", "A")).Notices; len(n) != 0 {
		t.Errorf("a killed task sent notices: %v", n)
	}
}

// procOf reads a task's recorded supervisor or command.
func (e *testEnv) procOf(id, which string) procRecord {
	var p procRecord
	if err := readJSON(filepath.Join(e.stateDir, "tasks", id, which+".json"), &p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// TestVanishedSupervisor: status is the truth when the supervisor and the
// command die unrecorded, when only the supervisor dies, and after a
// reboot.
func TestVanishedSupervisor(t *testing.T) {
	e := newTestEnv(t, "")
	t.Run("both_killed", func(t *testing.T) {
		id := e.start("sleep 300", "A")
		sup, cmd := e.procOf(id, "supervisor"), e.procOf(id, "command")
		syscall.Kill(sup.PID, syscall.SIGKILL)
		syscall.Kill(cmd.PID, syscall.SIGKILL)
		waitFor(t, 5*time.Second, "the supervisor to die", func() bool { return !sup.alive() })
		if got := e.call(outputReq(id, "A", "")).text(); got != noNewOutput(taskStatus{State: stateKilled}) {
			t.Errorf("status = %q", got)
		}
	})
	t.Run("supervisor_only", func(t *testing.T) {
		pidFile := filepath.Join(e.workspace, "escaped")
		id := e.start("setsid sleep 300 & echo $! > escaped; sleep 300", "A")
		escaped := readPIDs(t, pidFile)
		defer killAll(escaped)
		sup := e.procOf(id, "supervisor")
		syscall.Kill(sup.PID, syscall.SIGKILL)
		waitFor(t, 5*time.Second, "the supervisor to die", func() bool { return !sup.alive() })
		if got := e.call(outputReq(id, "A", `"wait":true`)).text(); got != noNewOutput(taskStatus{State: stateKilled}) {
			t.Errorf("status = %q", got)
		}
		cmd := e.procOf(id, "command")
		waitFor(t, 5*time.Second, "the orphaned command to be stopped", func() bool { return !cmd.alive() })
		// The escapee left the session, but not the output pipes.
		waitFor(t, 5*time.Second, "the setsid escapee to be stopped", func() bool { return !pidAlive(escaped[0]) })
	})
	t.Run("redirected_member", func(t *testing.T) {
		// A member that holds no output pipe is proven the task's by the
		// leader, which stops, and so keeps its session id, when the
		// supervisor dies.
		id := e.start("sleep 300 > /dev/null 2>&1 & echo $! > quiet; wait", "A")
		quiet := readPIDs(t, filepath.Join(e.workspace, "quiet"))
		defer killAll(quiet)
		sup, cmd := e.procOf(id, "supervisor"), e.procOf(id, "command")
		syscall.Kill(sup.PID, syscall.SIGKILL)
		waitFor(t, 5*time.Second, "the leader to stop", func() bool {
			s, err := readProcStat(cmd.PID)
			return err == nil && s.state == 'T'
		})
		if got := e.call(sessionReq("bash_list", "{}", "A")).text(); !strings.Contains(got, id+" killed") {
			t.Errorf("list = %q", got)
		}
		waitFor(t, 5*time.Second, "the quiet member to be stopped", func() bool { return !pidAlive(quiet[0]) })
		waitFor(t, 5*time.Second, "the leader to be stopped", func() bool { return !cmd.alive() })
	})
	t.Run("kill_after_supervisor", func(t *testing.T) {
		// The shell stops with its supervisor; the sleep in its group lives on.
		id := e.start("sleep 300 & echo $! > member; wait", "A")
		member := readPIDs(t, filepath.Join(e.workspace, "member"))[0]
		sup := e.procOf(id, "supervisor")
		syscall.Kill(sup.PID, syscall.SIGKILL)
		waitFor(t, 5*time.Second, "the supervisor to die", func() bool { return !sup.alive() })
		if got := e.call(sessionReq("bash_kill", `{"task_id":`+jsonString(id)+`}`, "A")).text(); got != textKilled(id) {
			t.Errorf("kill = %q", got)
		}
		waitFor(t, 5*time.Second, "the group member to be stopped", func() bool { return !pidAlive(member) })
		if got := e.call(outputReq(id, "A", "")).text(); got != noNewOutput(taskStatus{State: stateKilled}) {
			t.Errorf("status = %q", got)
		}
		if got := e.call(sessionReq("bash_kill", `{"task_id":`+jsonString(id)+`}`, "A")).text(); got != textAlreadyDone(id) {
			t.Errorf("second kill = %q", got)
		}
	})
	t.Run("reboot", func(t *testing.T) {
		id := e.start("sleep 300", "A")
		sup := e.procOf(id, "supervisor")
		defer signalProcess(sup.PID, sup.Start, syscall.SIGKILL)
		forged := sup
		forged.BootID = "an-earlier-boot"
		writeJSON(filepath.Join(e.stateDir, "tasks", id, "supervisor.json"), &forged)
		if got := e.call(outputReq(id, "A", "")).text(); got != noNewOutput(taskStatus{State: stateKilled}) {
			t.Errorf("status after a reboot = %q", got)
		}
	})
}

// TestFence: one session never reads, waits on, kills or lists another's
// task; a call without a session cannot touch an owned task; ownerless
// tasks are open.
func TestFence(t *testing.T) {
	e := newTestEnv(t, "")
	a := e.start("sleep 300", "A")
	b := e.start("sleep 300", "B")
	open := e.start("sleep 300", "")
	for _, tt := range []struct{ id, caller string }{{a, "B"}, {b, "A"}, {a, ""}, {b, ""}} {
		for _, req := range []string{outputReq(tt.id, tt.caller, ""), outputReq(tt.id, tt.caller, `"wait":true,"timeout_ms":100`),
			sessionReq("bash_kill", `{"task_id":`+jsonString(tt.id)+`}`, tt.caller)} {
			if got := e.call(req).text(); got != "Error: task "+tt.id+" belongs to another session" {
				t.Errorf("%s: %q", req, got)
			}
		}
	}
	lists := map[string]string{
		"A": a + " running — sleep 300\n" + open + " running — sleep 300",
		"B": b + " running — sleep 300\n" + open + " running — sleep 300",
		"":  open + " running — sleep 300",
	}
	for caller, want := range lists {
		if got := e.call(sessionReq("bash_list", "{}", caller)).text(); got != want {
			t.Errorf("list for %q = %q, want %q", caller, got, want)
		}
	}
	if got := e.call(sessionReq("bash_kill", `{"task_id":`+jsonString(open)+`}`, "B")).text(); got != textKilled(open) {
		t.Errorf("ownerless kill = %q", got)
	}
	if got := e.call(sessionReq("bash_kill", `{"task_id":`+jsonString(a)+`}`, "A")).text(); got != textKilled(a) {
		t.Errorf("own kill = %q", got)
	}
}

// TestNoticesOnce: a settled task's notice reaches its owner once, even
// when responses race, and never another session.
func TestNoticesOnce(t *testing.T) {
	e := newTestEnv(t, "")
	// The tasks settle only once all have started: a start's own response
	// would carry the notices of tasks settled before it.
	gate := "until [ -e go ]; do sleep 0.02; done; "
	for _, cmd := range []string{"true", "exit 4", "kill -KILL $$"} {
		e.start(gate+cmd, "A")
	}
	e.start(gate+"true", "B")
	os.WriteFile(filepath.Join(e.workspace, "go"), nil, 0o644)
	waitFor(t, 10*time.Second, "every task to settle", func() bool {
		n, _ := filepath.Glob(filepath.Join(e.stateDir, "tasks", "*", "status.json"))
		return len(n) == 4
	})
	var mu sync.Mutex
	var notices []string
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.call(sessionReq("bash_list", "{}", "A"))
			mu.Lock()
			notices = append(notices, r.Notices...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Strings(notices)
	golden(t, "notices", strings.Join(notices, "\n"))
	if r := e.call(sessionReq("bash_list", "{}", "A")); len(r.Notices) != 0 {
		t.Errorf("notices delivered again: %v", r.Notices)
	}
	if r := e.call(sessionReq("bash_list", "{}", "B")); len(r.Notices) != 1 || !strings.Contains(r.Notices[0], "bash-4") {
		t.Errorf("session B notices = %v", r.Notices)
	}
}

// TestLossyRead: unread output beyond max_output_bytes is dropped from the
// read, which names the complete file, or (unavailable) without one.
func TestLossyRead(t *testing.T) {
	e := newTestEnv(t, "max_output_bytes = 100\nmax_spill_bytes = 10000\n")
	id := e.start("seq 1 1000", "A")
	r := e.waitDone(id, "A")
	golden(t, "with_file", e.scrub(r.text()))
	full, _ := os.ReadFile(e.taskFull(id, "stdout"))
	if lines := strings.Count(string(full), "\n"); lines != 1000 {
		t.Errorf("the complete file has %d lines, want 1000", lines)
	}
	id = e.start("seq 1 5000", "A")
	golden(t, "unavailable", e.scrub(e.waitDone(id, "A").text()))
	if p := e.taskFull(id, "stdout"); p == "" || fileExists(p) {
		t.Error("the complete file was kept past max_spill_bytes")
	}
}

// TestWaitTimeout: a wait that times out is not an error and leaves the
// task running.
func TestWaitTimeout(t *testing.T) {
	e := newTestEnv(t, "")
	id := e.start("sleep 300", "A")
	start := time.Now()
	r := e.call(outputReq(id, "A", `"wait":true,"timeout_ms":400`))
	if took := time.Since(start); took < 400*time.Millisecond || took > 5*time.Second {
		t.Errorf("the wait took %v", took)
	}
	if r.IsError || r.text() != noNewOutput(taskStatus{State: stateRunning}) {
		t.Errorf("response = %q (isError %v)", r.text(), r.IsError)
	}
	start = time.Now()
	id2 := e.start("sleep 0.3; echo done", "A")
	if got := e.call(outputReq(id2, "A", `"wait":true`)).text(); got != "done\n"+statusLine(taskStatus{State: stateCompleted}) {
		t.Errorf("wait = %q", got)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a wait for a 0.3s task took %v", took)
	}
}

// TestTaskLimit: max_tasks_per_session running tasks per owner.
func TestTaskLimit(t *testing.T) {
	e := newTestEnv(t, "[background]\nmax_tasks_per_session = 2\n")
	e.start("sleep 300", "A")
	e.start("sleep 300", "A")
	golden(t, "limit", e.call(startReq("sleep 300", "A")).text())
	e.start("sleep 300", "B")
	e.call(sessionReq("bash_kill", `{"task_id":"bash-1"}`, "A"))
	e.start("true", "A")
}

// taskFull is the path of a task's complete copy of a stream (in the
// spill directory, named in the task's full.json), "" before it exists.
func (e *testEnv) taskFull(id, stream string) string {
	var fulls map[string]string
	readJSON(filepath.Join(e.stateDir, "tasks", id, "full.json"), &fulls)
	return fulls[stream]
}

// TestTaskLockHeld: a task whose lock another process holds and does not
// let go (stopped, say) makes a read fail after a bounded wait, with a
// clear error, rather than hang; once it is let go, the read gets
// everything.
func TestTaskLockHeld(t *testing.T) {
	e := newTestEnv(t, "")
	id := e.start("echo hi; sleep 300", "A")
	waitFor(t, 10*time.Second, "output", func() bool { return fileSize(e.taskFull(id, "stdout")) > 0 })
	f, err := os.OpenFile(filepath.Join(e.stateDir, "tasks", id, "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := e.call(outputReq(id, "A", ""))
	if !r.IsError || !strings.Contains(r.text(), "still locked by another process") {
		t.Errorf("a read of a task whose lock is held: %q", r.text())
	}
	t.Logf("it gave up after %v", time.Since(start).Round(time.Millisecond))
	f.Close()
	if got := e.call(outputReq(id, "A", "")).text(); !strings.HasPrefix(got, "hi\n") {
		t.Errorf("the read after the lock was let go: %q", got)
	}
	e.call(killReq(id, "A"))
}

// TestNoticeWithRead: a task's notice is carried once by its owner's next
// response after it settled (the contract's only exception is bash_kill),
// also when that response is the bash_output that shows the settled
// status: it is in that response's notices, and in no later one.
func TestNoticeWithRead(t *testing.T) {
	e := newTestEnv(t, "")
	// It outlives the start's response, which would carry its notice
	// otherwise (the owner's next response after it settled).
	if r := e.call(startReq("sleep 1; echo n", "N")); len(r.Notices) != 0 {
		t.Fatalf("the start carries a notice: %q", r.Notices)
	}
	r := e.call(outputReq("bash-1", "N", `"wait":true`))
	want := []string{"background bash task bash-1 finished completed, exit code: 0. Read its output with bash_output."}
	if !strings.HasSuffix(r.text(), "[status: completed, exit code: 0]") || !cmp.Equal(r.Notices, want) {
		t.Errorf("the read that shows the end: %q, notices %q; want %q", r.text(), r.Notices, want)
	}
	if r := e.call(sessionReq("bash_list", "{}", "N")); len(r.Notices) != 0 {
		t.Errorf("delivered again: %q", r.Notices)
	}
	if got, _ := e.waitOut("-session", "N", "-timeout", "0s"); len(got) != 0 {
		t.Errorf("wait: %q", got)
	}
}
