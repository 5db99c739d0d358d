package main

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// inNamespace re-runs the calling test in new Linux namespaces (flags of
// unshare(1)) and returns false; in that copy it returns true and the test
// goes on there. Every process left in a PID namespace dies with its first
// process, so a test run there leaves nothing behind.
func inNamespace(t *testing.T, flags ...string) bool {
	t.Helper()
	if os.Getenv("BASHCALL_TEST_NS") == t.Name() {
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to make namespaces")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare(1)")
	}
	args := append(flags, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=5m")
	c := exec.Command(unshare, args...)
	c.Env = append(os.Environ(), "BASHCALL_TEST_NS="+t.Name())
	out, err := c.CombinedOutput()
	t.Logf("in namespaces %v:\n%s", flags, out)
	if err != nil {
		t.Fatalf("the test failed in its namespaces: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test did not pass in its namespaces")
	}
	return false
}

// reap waits for a child that this process (the init of a PID namespace)
// inherited, so that its pid is free again.
func reap(t *testing.T, pid int) {
	t.Helper()
	// A killed process is this one's child to reap, or already reaped by
	// its parent: a supervisor sent SIGKILL a moment before its command
	// can still reap the command before it dies. Either way its pid is
	// free once it is gone.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		switch {
		case got == pid:
			return
		case err == syscall.ECHILD && syscall.Kill(pid, 0) == syscall.ESRCH:
			return
		case err != nil && err != syscall.ECHILD:
			t.Fatalf("reaping %d: %v", pid, err)
		case time.Now().After(deadline):
			t.Fatalf("pid %d is not gone", pid)
		}
	}
}

// forkAs runs script with sh in a new session whose leader has the pid
// want, forced through ns_last_pid (a fork elsewhere can take it first, so
// this retries), and returns the first line the script prints.
func forkAs(t *testing.T, want int, script string) string {
	t.Helper()
	for try := 0; try < 50; try++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(want-1)), 0); err != nil {
			t.Fatal(err)
		}
		c := exec.Command("/bin/sh", "-c", `read go; [ "$go" = y ] || exit 0; `+script)
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		in, _ := c.StdinPipe()
		out, _ := c.StdoutPipe()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid != want {
			in.Close()
			c.Wait()
			continue
		}
		fmt.Fprintln(in, "y")
		line, _ := bufio.NewReader(out).ReadString('\n')
		c.Wait()
		return strings.TrimSpace(line)
	}
	t.Fatalf("could not get pid %d", want)
	return ""
}

// TestOrphanPidReuse: the command of a task whose supervisor vanished is
// gone, and its pid now leads an unrelated session. The next look at the
// task must not touch that session, and says what it left running.
func TestOrphanPidReuse(t *testing.T) {
	if !inNamespace(t, "--pid", "--fork", "--mount-proc") {
		return
	}
	e := newTestEnv(t, "")
	id := e.start("sleep 300", "A")
	sup, cmd := e.procOf(id, "supervisor"), e.procOf(id, "command")
	syscall.Kill(sup.PID, syscall.SIGKILL)
	syscall.Kill(cmd.PID, syscall.SIGKILL)
	reap(t, sup.PID)
	reap(t, cmd.PID)
	other, _ := strconv.Atoi(forkAs(t, cmd.PID, "sleep 300 & echo $!"))
	defer syscall.Kill(other, syscall.SIGKILL)
	if s, err := readProcStat(other); err != nil || s.sid != cmd.PID {
		t.Fatalf("the unrelated process %d: %+v, %v; want it in session %d", other, s, err, cmd.PID)
	}
	if got := e.call(sessionReq("bash_list", "{}", "A")).text(); got != id+" killed — sleep 300" {
		t.Errorf("list = %q", got)
	}
	time.Sleep(100 * time.Millisecond)
	if !pidAlive(other) {
		t.Errorf("a process of the unrelated session %d was killed", cmd.PID)
	}
	var f taskFinal
	readJSON(filepath.Join(e.stateDir, "tasks", id, "status.json"), &f)
	if !strings.Contains(f.Note, "left running") || !strings.Contains(f.Note, strconv.Itoa(other)) {
		t.Errorf("the status note does not name what was left running: %q", f.Note)
	}
}

// TestKilledCallLeavesNothing: a foreground bashcall killed with SIGKILL
// leaves its command's processes, those that left its session or its
// output too, running only until the next invocation with its state dir.
func TestKilledCallLeavesNothing(t *testing.T) {
	// Whatever the next call is: one that lists, one that runs a
	// command, one refused before it could.
	for name, next := range map[string]string{
		"bash_list":  sessionReq("bash_list", "{}", ""),
		"foreground": bashReq("true", ""),
		"refused":    bashReq("", ""),
	} {
		t.Run(name, func(t *testing.T) { killedCallLeavesNothing(t, next) })
	}
}

func killedCallLeavesNothing(t *testing.T, next string) {
	e := newTestEnv(t, "")
	c := e.cmd()
	c.Stdin = strings.NewReader(bashReq(`sleep 1000 & echo $! > p1; (setsid sleep 1000 & echo $! > p2); (sleep 1000 & echo $! > p3)
sleep 1000 > /dev/null 2>&1 & echo $! > p4; echo $(cat p1 p2 p3 p4) $$ > pids; exec sleep 1000`, ""))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pids := readPIDs(t, filepath.Join(e.workspace, "pids"))
	defer killAll(pids)
	e.call(next) // a call that lives is left alone
	for _, pid := range pids {
		if !pidAlive(pid) {
			t.Fatalf("pid %d of a running call was stopped by another invocation", pid)
		}
	}
	c.Process.Kill()
	c.Wait()
	e.call(next)
	for _, pid := range pids {
		waitFor(t, 5*time.Second, fmt.Sprintf("pid %d of %v to be stopped", pid, pids), func() bool { return !pidAlive(pid) })
	}
	if left, _ := filepath.Glob(filepath.Join(e.stateDir, "calls", "*")); len(left) != 0 {
		t.Errorf("call records left behind: %v", left)
	}
}

func killAll(pids []int) {
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestEarlySupervisorKill: supervisors killed at once, 50 times, some
// while their command is starting, some frozen between starting it and
// recording it; once the next invocation looks, nothing of them runs.
func TestEarlySupervisorKill(t *testing.T) {
	e := newTestEnv(t, "[background]\nmax_tasks_per_session = 100\n")
	rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
	defer killInDir(e.workspace)
	started, failed := 0, false
	for i := 1; i <= 50; i++ {
		done := make(chan result, 1)
		go func() { done <- e.run(startReq(fmt.Sprintf("sleep 300 & echo $! > bg%d; sleep 300", i), "")) }()
		dir := filepath.Join(e.stateDir, "tasks", fmt.Sprintf("bash-%d", i))
		var sup procRecord
		for deadline := time.Now().Add(10 * time.Second); readJSON(filepath.Join(dir, "supervisor.json"), &sup) != nil; {
			if time.Now().After(deadline) {
				t.Fatalf("task %d: no supervisor.json", i)
			}
			time.Sleep(100 * time.Microsecond)
		}
		if i%2 == 0 {
			time.Sleep(time.Duration(rnd.Intn(40000)) * time.Microsecond)
		} else {
			// Freeze the supervisor as soon as its command exists, and kill it
			// once the command runs, before it can record it.
			for deadline := time.Now().Add(5 * time.Second); len(childrenOf(sup.PID)) == 0 && time.Now().Before(deadline); {
				time.Sleep(50 * time.Microsecond)
			}
			syscall.Kill(sup.PID, syscall.SIGSTOP)
			for deadline := time.Now().Add(2 * time.Second); !fileExists(filepath.Join(e.workspace, fmt.Sprintf("bg%d", i))) && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
		syscall.Kill(sup.PID, syscall.SIGKILL)
		r := <-done
		if r.code != 0 {
			t.Fatalf("start %d: exit %d: %s %s", i, r.code, r.stdout, r.stderr)
		}
		switch w := decodeResponse(t, r.stdout); {
		case w.text() == fmt.Sprintf("started background task bash-%d", i):
			started++
		case w.IsError && !failed:
			golden(t, "start_failed", w.text())
			failed = true
		case w.IsError && w.text() == "Error: cannot start the background task: the supervisor exited before the command started":
		default:
			t.Errorf("start %d answered %q", i, w.text())
		}
	}
	// A start that failed is listed too, settled killed, so that its
	// reason can be read (PROTOCOL.md section 6).
	if list := e.call(sessionReq("bash_list", "{}", "")).text(); strings.Count(list, " killed — ") != 50 {
		t.Errorf("%d tasks were started and %d failed to, but bash_list says:\n%s", started, 50-started, list)
	}
	left := procsInDir(e.workspace)
	for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = procsInDir(e.workspace) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("left running after the next invocation looked: %q", left)
	}
	t.Logf("%d of 50 starts answered started", started)
}

// childrenOf lists the children of pid, from /proc.
func childrenOf(pid int) []string {
	var kids []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, p := range tasks {
		b, _ := os.ReadFile(p)
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}

// procsInDir lists the live processes whose working directory is dir, as
// "pid cmdline".
func procsInDir(dir string) []string {
	var found []string
	for pid, s := range scanProcs() {
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && cwd == dir && !s.zombie {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			found = append(found, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmd), "\x00", " ")))
		}
	}
	return found
}

// killInDir kills what runs in dir, so that a failed test leaves nothing.
func killInDir(dir string) {
	for _, p := range procsInDir(dir) {
		pid, _ := strconv.Atoi(strings.Fields(p)[0])
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestTreeOwnership: which live processes a tree record proves its own.
func TestTreeOwnership(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	treeOwnership(t)
}

// TestTreeOwnershipInContainer: the same in a PID namespace whose first
// process began its session outside it, as in a container: every session id
// there reads 0, and a session of 0 is nobody's tree.
func TestTreeOwnershipInContainer(t *testing.T) {
	if inNamespace(t, "--pid", "--fork", "--mount-proc") {
		if s, err := readProcStat(os.Getpid()); err != nil || s.sid != 0 {
			t.Fatalf("the session id in the namespace is %d (%v), want 0", s.sid, err)
		}
		treeOwnership(t)
	}
}

func treeOwnership(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := func(script string, out *os.File, setsid bool) int {
		c := exec.Command("/bin/sh", "-c", script)
		c.Stdout = out
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if setsid {
				syscall.Kill(-c.Process.Pid, syscall.SIGKILL) // its group too
			}
			c.Process.Kill()
			c.Wait()
		})
		return c.Process.Pid
	}
	early := start("exec sleep 100", w, true)
	time.Sleep(30 * time.Millisecond) // past a clock tick
	rec := newTreeRecord([]*os.File{w})
	rec.Since, _ = procStartTime(start("exec sleep 100", nil, true))
	holder := start("exec sleep 100", w, true)
	leader := start("sleep 100 > /dev/null & exec sleep 100", w, true)
	sameSession := start("exec sleep 100", w, false)
	neighbour := start("exec sleep 100", nil, false)
	stranger := start("exec sleep 100", nil, true)
	w.Close()
	var quiet int
	waitFor(t, 5*time.Second, "the quiet member", func() bool {
		for pid, s := range scanProcs() {
			if s.sid == leader && pid != leader {
				quiet = pid
				return true
			}
		}
		return false
	})
	owned, _ := rec.owned(scanProcs())
	for _, tt := range []struct {
		name string
		pid  int
		want bool
	}{
		{"a pipe holder older than the floor", early, false},
		{"a pipe holder", holder, true},
		{"a pipe holder that leads a session", leader, true},
		{"a member of its session without the pipe", quiet, true},
		{"a pipe holder in an older session", sameSession, true},
		{"a member of that older session", neighbour, false},
		{"a stranger", stranger, false},
		{"this test", os.Getpid(), false},
	} {
		if _, got := owned[tt.pid]; got != tt.want {
			t.Errorf("%s (pid %d): owned = %v, want %v", tt.name, tt.pid, got, tt.want)
		}
	}
	if len(owned) != 4 {
		t.Errorf("owned = %v, want 4 processes", owned)
	}
	other := *rec
	other.BootID = "an-earlier-boot"
	if owned, _ := other.owned(scanProcs()); len(owned) != 0 {
		t.Errorf("a record of another boot owns %v", owned)
	}
}

// TestSweepSparesOnlyItself: the sweep of dead calls leaves this
// process's own record alone (a warm child makes it ahead of its call),
// but not the record of a dead process whose pid this one reuses.
func TestSweepSparesOnlyItself(t *testing.T) {
	dir, err := openStateDir(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	inv := newInvocation(nil)
	inv.stateDir = dir
	own := inv.newCallRecord()
	if own == nil {
		t.Fatal("no record made")
	}
	defer own.done()
	reused := filepath.Join(inv.callsDir(), fmt.Sprintf("%d-1.json", os.Getpid())) // started at tick 1: dead
	if err := os.WriteFile(reused, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	inv.stopDeadCalls()
	if _, err := os.Stat(own.path); err != nil {
		t.Errorf("this process's own record was swept: %v", err)
	}
	if _, err := os.Stat(reused); err == nil {
		t.Error("the record of a dead process with this pid was left")
	}
}
