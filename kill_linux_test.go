package main

// bash_kill where things go wrong: a killer that cannot signal, a state
// dir with no inode left, and two kills at once.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestKillCannotSignal: a bash_kill that cannot reach the task (run with
// too few descriptors to open a pidfd or a /proc file) says so, claiming
// nothing of the task, and leaves it as it was: still running, not marked
// killed, its notice still due. The task then completes and is reported
// completed, with a notice.
func TestKillCannotSignal(t *testing.T) {
	e := newTestEnv(t, "grace_ms = 300\n")
	id := e.start("sleep 2; echo done", "A")
	c := e.cmd()
	c.Args = append([]string{"bash", "-c", `ulimit -n 8; exec "$0" "$@"`, c.Path}, c.Args[1:]...)
	c.Path = "/bin/bash"
	c.Stdin = strings.NewReader(killReq(id, "A"))
	out, err := c.Output()
	if err != nil {
		t.Fatalf("bash_kill with 8 descriptors: %v\n%s", err, out)
	}
	r := decodeResponse(t, string(out))
	if !r.IsError || !strings.HasPrefix(r.text(), "Error: cannot look at background task "+id+" now (") || !strings.HasSuffix(r.text(), "); call bash_kill again") {
		t.Fatalf("bash_kill that could not signal answered %q", r.text())
	}
	golden(t, "cannot_look", r.text())
	c = e.cmd()
	c.Args = append([]string{"bash", "-c", `ulimit -n 8; exec "$0" "$@"`, c.Path}, c.Args[1:]...)
	c.Path = "/bin/bash"
	c.Stdin = strings.NewReader(sessionReq("bash_list", "{}", "A"))
	if out, err = c.Output(); err != nil {
		t.Fatalf("bash_list with 8 descriptors: %v\n%s", err, out)
	}
	golden(t, "cannot_list", decodeResponse(t, string(out)).text())
	if got := e.call(sessionReq("bash_list", "{}", "A")).text(); !strings.HasPrefix(got, id+" running") {
		t.Errorf("after the failed kill, bash_list = %q", got)
	}
	e.awaitSettled(id)
	if r := e.call(sessionReq("bash_list", "{}", "A")); !strings.HasPrefix(r.text(), id+" completed, exit code: 0") || len(r.Notices) != 1 {
		t.Errorf("the task that was not killed: %q, notices %v", r.text(), r.Notices)
	}
}

// TestKillNoInodes: with no inode left in the state dir, bash_kill still
// stops a task and it is recorded as killed (the marker is a file the
// supervisor made at its start, renamed).
func TestKillNoInodes(t *testing.T) {
	if !inNamespace(t, "--mount") {
		return
	}
	e := newTestEnv(t, "grace_ms = 300\n")
	small := filepath.Join(e.dir, "small")
	mountTmpfs(t, small, 4<<20, "nr_inodes=80")
	t.Cleanup(e.stopTasks) // before the unmount
	e.stateDir = filepath.Join(small, "state")
	id := e.start("echo started; sleep 300", "A")
	waitFor(t, 10*time.Second, "output", func() bool { return fileSize(e.taskFull(id, "stdout")) > 0 })
	fill := filepath.Join(small, "fill")
	os.Mkdir(fill, 0o700)
	for i := 0; ; i++ {
		f, err := os.Create(filepath.Join(fill, fmt.Sprint(i)))
		if err != nil {
			break
		}
		f.Close()
	}
	if got := e.call(killReq(id, "A")).text(); got != textKilled(id) {
		t.Errorf("bash_kill with no inode left = %q", got)
	}
	if got := e.call(outputReq(id, "A", "")).text(); !strings.HasSuffix(got, statusLine(taskStatus{State: stateKilled, Signal: "SIGTERM"})) {
		t.Errorf("after the kill: %q", got)
	}
}

// TestKillTwice: two bash_kills at once give the command its whole grace
// (the second does not turn the first's SIGTERM into a SIGKILL), and both
// answer once it has settled.
func TestKillTwice(t *testing.T) {
	e := newTestEnv(t, "grace_ms = 3000\n")
	id := e.start(`trap 'echo got term; sleep 0.5; echo clean exit; exit 0' TERM; echo ready; while :; do sleep 0.05; done`, "A")
	waitFor(t, 10*time.Second, "the trap", func() bool { return fileSize(e.taskFull(id, "stdout")) > 0 })
	var wg sync.WaitGroup
	texts := make([]string, 2)
	for i := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 50 * time.Millisecond)
			texts[i] = e.call(killReq(id, "A")).text()
		}()
	}
	wg.Wait()
	for _, got := range texts {
		if got != textKilled(id) && got != textAlreadyDone(id) {
			t.Errorf("a bash_kill answered %q", got)
		}
	}
	got := e.call(outputReq(id, "A", "")).text()
	if !strings.Contains(got, "clean exit") || !strings.HasSuffix(got, statusLine(taskStatus{State: stateKilled})) {
		t.Errorf("two kills at once cut the grace short: %q", got)
	}
}

// TestStartNoInodes: a background start that fails for want of inodes in
// the state dir while filing the task under its owner leaves no task that
// is listed as running (and counted against the limit) for a command that
// never ran.
func TestStartNoInodes(t *testing.T) {
	if !inNamespace(t, "--mount") {
		return
	}
	e := newTestEnv(t, "")
	small := filepath.Join(e.dir, "small")
	mountTmpfs(t, small, 4<<20, "nr_inodes=120")
	t.Cleanup(e.stopTasks) // before the unmount
	e.stateDir = filepath.Join(small, "state")
	id := e.start("true", "A") // the session's directories, made
	e.waitDone(id, "A")
	fill := filepath.Join(small, "fill")
	os.Mkdir(fill, 0o700)
	n := 0
	for ; ; n++ {
		f, err := os.Create(filepath.Join(fill, fmt.Sprint(n)))
		if err != nil {
			break
		}
		f.Close()
	}
	// Three inodes: the task's directory, its task.json and its entry
	// among its owner's tasks, and none for its running mark.
	for i := 1; i <= 3; i++ {
		os.Remove(filepath.Join(fill, fmt.Sprint(n-i)))
	}
	r := e.call(startReq("sleep 300", "A"))
	if !r.IsError {
		t.Fatalf("a start with three inodes left: %q", r.text())
	}
	if text := e.call(sessionReq("bash_list", `{}`, "A")).text(); strings.Contains(text, "running") {
		t.Errorf("after a start that failed (%q), the list = %q", r.text(), text)
	}
}

// TestKillWhileGC: gc, run in a loop beside bash_kill, removes a task the
// kill settled before the kill looks at it again: the kill answers that
// it killed the task, not that it is still running.
func TestKillWhileGC(t *testing.T) {
	e := newTestEnv(t, "")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			c := e.cmd("gc", "-older-than", "0s")
			c.Run()
		}
	}()
	defer func() { close(stop); <-done }()
	for i := 0; i < 8; i++ {
		id := e.start("sleep 30", "A")
		if text := e.call(killReq(id, "A")).text(); strings.Contains(text, "still running") {
			t.Errorf("bash_kill beside gc: %q", text)
		}
	}
}

// TestKillerDiedBeforeSignal: a bash_kill that ended between its marker
// and its signal (killed itself, say) leaves the marker and holds the
// task's notice. The task, never signalled, ends on its own: it is
// recorded as it ended (completed with its exit code, or killed by the
// signal it died of), and its notice reaches its owner, once. So too when
// the supervisor's verdict came before that kill's marker: the notice
// held by then is given back once the status is recorded.
func TestKillerDiedBeforeSignal(t *testing.T) {
	for _, c := range []struct {
		end, status, notice string
		marked              bool
	}{
		{"exit 3", statusLine(taskStatus{State: stateCompleted, ExitCode: 3}), "completed, exit code: 3", true},
		{"kill -KILL $$", statusLine(taskStatus{State: stateKilled, Signal: "SIGKILL"}), "killed by SIGKILL", true},
		{"exit 4", statusLine(taskStatus{State: stateCompleted, ExitCode: 4}), "completed, exit code: 4", false},
	} {
		e := newTestEnv(t, "")
		gate := filepath.Join(e.dir, "gate")
		id := e.start("until [ -e "+shellQuote(gate)+" ]; do sleep 0.01; done; "+c.end, "A")
		dir := filepath.Join(e.stateDir, "tasks", id)
		// What the killer had done: the marker made (unless after the
		// verdict), the notice held.
		if c.marked {
			if err := os.Rename(filepath.Join(dir, "kill.reserve"), filepath.Join(dir, "kill")); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Rename(filepath.Join(sessionDir(e.stateDir, ownerKey("A")), "pending", id), filepath.Join(dir, "notice.held")); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(gate, nil, 0o600)
		waitFor(t, 10*time.Second, "the task to end", func() bool { return fileExists(filepath.Join(dir, "status.json")) })
		var notices []string
		for i := 0; i < 2; i++ {
			notices = append(notices, e.call(sessionReq("bash_list", "{}", "A")).Notices...)
		}
		if len(notices) != 1 || !strings.Contains(notices[0], id) || !strings.Contains(notices[0], c.notice) {
			t.Errorf("%s: the notices: %q", c.end, notices)
		}
		if got := e.call(outputReq(id, "A", "")).text(); !strings.HasSuffix(got, c.status) {
			t.Errorf("%s: the task reads %q, want it to end %q", c.end, got, c.status)
		}
	}
}

// TestKillWhileDraining: a bash_kill that comes once the task's shell has
// exited, while a process it left still holds the output, stops that
// process and records the task killed, with no notice: the stop reached
// the supervisor while it drained the pipes.
func TestKillWhileDraining(t *testing.T) {
	e := newTestEnv(t, "")
	id := e.start("(sleep 1.5; echo late) & echo early; exit 0", "A")
	waitFor(t, 10*time.Second, "the shell's output", func() bool { return fileSize(e.taskFull(id, "stdout")) > 0 })
	time.Sleep(200 * time.Millisecond) // the shell has exited
	if got := e.call(killReq(id, "A")); got.text() != textKilled(id) || len(got.Notices) != 0 {
		t.Errorf("bash_kill answered %q with notices %q", got.text(), got.Notices)
	}
	got := e.call(outputReq(id, "A", ""))
	if !strings.HasSuffix(got.text(), statusLine(taskStatus{State: stateKilled, Signal: "SIGKILL"})) && !strings.HasSuffix(got.text(), statusLine(taskStatus{State: stateKilled})) {
		t.Errorf("the task reads %q", got.text())
	}
	if strings.Contains(got.text(), "late") || len(got.Notices) != 0 {
		t.Errorf("after the kill: %q, notices %q", got.text(), got.Notices)
	}
}

// lockDir takes an flock of how on dir, as a tool (shared) or gc
// (exclusive) holds a task's directory; the returned func lets go.
func lockDir(t *testing.T, dir string, how int) func() {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(d.Fd()), how); err != nil {
		t.Fatal(err)
	}
	return func() { d.Close() }
}

// TestGCSkipsTaskInUse: gc does not remove a settled task that a tool
// holds (a kill that has yet to read how the task ended, a read), and
// removes it once it is let go.
func TestGCSkipsTaskInUse(t *testing.T) {
	e := newTestEnv(t, "")
	id := e.start("true", "A")
	e.awaitSettled(id)
	dir := filepath.Join(e.stateDir, "tasks", id)
	unlock := lockDir(t, dir, syscall.LOCK_SH)
	out, err := e.cmd("gc", "-older-than", "0s").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "removed 0 finished tasks") || !exists(dir) {
		t.Errorf("gc beside a tool holding the task: %v, %q; the task is still there: %v", err, out, exists(dir))
	}
	unlock()
	out, err = e.cmd("gc", "-older-than", "0s").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "removed 1 finished tasks") || exists(dir) {
		t.Errorf("gc once the task is let go: %v, %q; the task is still there: %v", err, out, exists(dir))
	}
}

// TestToolsBesideStuckGC: a gc stopped while it holds a settled task's
// directory (its exclusive lock) makes bash_output and bash_kill wait
// holdWait, then say they cannot look now, claiming nothing; once it is let
// go they answer as ever.
func TestToolsBesideStuckGC(t *testing.T) {
	e := newTestEnv(t, "")
	// The start's answer counts too: a task as short as this one can
	// settle before it, and its notice travel with it.
	started := e.call(startReq("echo out", "A"))
	id, ok := strings.CutPrefix(started.text(), textStarted(""))
	if !ok {
		t.Fatalf("start: %q", started.text())
	}
	e.awaitSettled(id)
	unlock := lockDir(t, filepath.Join(e.stateDir, "tasks", id), syscall.LOCK_EX)
	start := time.Now()
	notices := len(started.Notices)
	for _, c := range []struct{ req, tool string }{{outputReq(id, "A", ""), "bash_output"}, {killReq(id, "A"), "bash_kill"}} {
		r := e.call(c.req)
		notices += len(r.Notices) // the session's, which travel with any answer
		if want := "Error: " + errCannotLook(c.tool, id, errCollecting).Error(); r.text() != want {
			t.Errorf("%s beside a stuck gc: %q; want %q", c.tool, r.text(), want)
		}
		golden(t, c.tool, r.text())
	}
	if d := time.Since(start); d < 2*holdWait || d > 2*holdWait+5*time.Second {
		t.Errorf("the two calls took %v", d)
	}
	unlock()
	r := e.call(outputReq(id, "A", ""))
	if notices += len(r.Notices); r.text() != "out\n"+statusLine(taskStatus{State: stateCompleted}) || notices != 1 {
		t.Errorf("once gc let go: %q; %d notices in all", r.text(), notices)
	}
}

// TestToolsShortOfDescriptors: bash_output (with and without a wait) and
// bash_kill run with few descriptors left (ulimit -n from 8 up) answer
// either as with plenty or that they cannot look now: never that a
// running task is unknown, killed or already finished, which each look at
// a process would say once it could not open what it looks at. Nor is
// anything recorded of the task.
func TestToolsShortOfDescriptors(t *testing.T) {
	e := newTestEnv(t, "")
	limited := func(n int, req string) string {
		c := withDescriptors(e.cmd(), n)
		c.Stdin = strings.NewReader(req)
		out, err := c.Output()
		if err != nil {
			t.Fatalf("with %d descriptors: %v\n%s", n, err, out)
		}
		return decodeResponse(t, string(out)).text()
	}
	cannot := func(got, id, tool string) bool {
		return strings.HasPrefix(got, "Error: cannot look at background task "+id+" now (") && strings.HasSuffix(got, "); call "+tool+" again")
	}
	for n := 8; n <= 16; n++ {
		id := e.start("sleep 30", "A")
		if got := limited(n, outputReq(id, "A", "")); !strings.HasSuffix(got, statusLine(taskStatus{State: stateRunning})) && !cannot(got, id, "bash_output") {
			t.Errorf("bash_output with %d descriptors: %q", n, got)
		}
		if got := limited(n, sessionReq("bash_list", "{}", "A")); !strings.Contains(got, id+" running") && !strings.HasPrefix(got, "Error: cannot list background tasks now (") {
			t.Errorf("bash_list with %d descriptors: %q", n, got)
		}
		switch got := limited(n, killReq(id, "A")); {
		case got == textKilled(id):
		case cannot(got, id, "bash_kill"):
			if list := e.call(sessionReq("bash_list", "{}", "A")).text(); !strings.Contains(list, id+" running") {
				t.Errorf("with %d descriptors, a kill that could not look left the task: %q", n, list)
			}
			e.call(killReq(id, "A"))
		default:
			t.Errorf("bash_kill with %d descriptors: %q", n, got)
		}
		for _, other := range []struct{ req, want string }{
			{outputReq("bash-999", "A", ""), errUnknownTask("bash-999").Error()},
			{killReq(id, "B"), errOtherSession(id).Error()},
		} {
			if got := limited(n, other.req); got != "Error: "+other.want {
				t.Errorf("%s with %d descriptors: %q, want %q", other.req, n, got, other.want)
			}
		}
		// A wait for a task that completes meanwhile.
		id = e.start("sleep 1; echo done; echo err >&2", "A")
		got := limited(n, outputReq(id, "A", `"wait":true,"timeout_ms":10000`))
		if !strings.HasSuffix(got, statusLine(taskStatus{State: stateCompleted})) && !cannot(got, id, "bash_output") {
			t.Errorf("bash_output with a wait and %d descriptors: %q", n, got)
		}
		e.awaitSettled(id)
		if got := e.call(outputReq(id, "A", "")).text(); !strings.HasSuffix(got, statusLine(taskStatus{State: stateCompleted})) {
			t.Errorf("after a wait with %d descriptors, the task: %q", n, got)
		}
	}
}

// TestGCAside: gc moves a task's directory aside under its lock before it
// removes it, so that a tool that gave up waiting for a gc stopped midway
// finds no task, rather than half of one it would settle again (as killed,
// with a second notice). What a gc that died left aside, the next removes.
func TestGCAside(t *testing.T) {
	e := newTestEnv(t, "")
	id := e.start("true", "A")
	e.awaitSettled(id)
	dir := filepath.Join(e.stateDir, "tasks", id)
	aside := filepath.Join(e.stateDir, "tasks", gcAside+id)
	unlock := lockDir(t, dir, syscall.LOCK_EX)
	if err := os.Rename(dir, aside); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(aside, "status.json")) // and had begun removing it
	for _, req := range []string{outputReq(id, "A", ""), killReq(id, "A")} {
		if r := e.call(req); r.text() != "Error: "+errUnknownTask(id).Error() || len(r.Notices) != 0 {
			t.Errorf("%s while gc holds the task aside: %q, notices %v", req, r.text(), r.Notices)
		}
	}
	if exists(dir) || exists(filepath.Join(aside, "status.json")) {
		t.Errorf("a tool recorded something of the task gc is removing: %v %v", exists(dir), exists(filepath.Join(aside, "status.json")))
	}
	unlock() // as if that gc died
	out, err := e.cmd("gc", "-older-than", "0s").CombinedOutput()
	if err != nil || exists(aside) {
		t.Errorf("gc after one that died midway: %v, %q; left aside: %v", err, out, exists(aside))
	}
}

// TestWaitSupervisorKilled: a wait on a task whose supervisor is killed
// (SIGKILL, nothing recorded) answers it killed at once, also with few
// descriptors to spare, rather than spinning until its timeout beside a
// pidfd that stays readable.
func TestWaitSupervisorKilled(t *testing.T) {
	e := newTestEnv(t, "")
	for _, n := range []int{12, 14, 16, 18, 0} {
		id := e.start("sleep 60", "A")
		c := withDescriptors(e.cmd(), n)
		c.Stdin = strings.NewReader(outputReq(id, "A", `"wait":true,"timeout_ms":20000`))
		var out bytes.Buffer
		c.Stdout = &out
		if d := e.killSupervisorDuring(id, c); d > 5*time.Second {
			t.Errorf("with %d descriptors, the wait answered %v after the supervisor died", n, d)
		}
		got := decodeResponse(t, out.String()).text()
		if !strings.HasSuffix(got, statusLine(taskStatus{State: stateKilled})) && !strings.HasPrefix(got, "Error: cannot look at background task "+id+" now (") {
			t.Errorf("with %d descriptors: %q", n, got)
		}
		e.call(killReq(id, "A"))
	}
}

// withDescriptors runs c with at most n file descriptors (ulimit -n); n = 0
// leaves it as it is.
func withDescriptors(c *exec.Cmd, n int) *exec.Cmd {
	if n > 0 {
		c.Args = append([]string{"bash", "-c", fmt.Sprintf(`ulimit -n %d; exec "$0" "$@"`, n), c.Path}, c.Args[1:]...)
		c.Path = "/bin/bash"
	}
	return c
}

// killSupervisorDuring starts c, kills task id's supervisor with -9 while
// c runs, and returns how long c took to exit after that.
func (e *testEnv) killSupervisorDuring(id string, c *exec.Cmd) time.Duration {
	e.t.Helper()
	var sup procRecord
	waitFor(e.t, 10*time.Second, "the supervisor's record", func() bool {
		return readJSON(filepath.Join(e.stateDir, "tasks", id, "supervisor.json"), &sup) == nil && sup.PID > 0
	})
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	syscall.Kill(sup.PID, syscall.SIGKILL)
	start := time.Now()
	c.Wait()
	return time.Since(start)
}
