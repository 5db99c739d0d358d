package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs of size bytes on dir (made if missing), for a
// test running in its own mount namespace.
func mountTmpfs(t *testing.T, dir string, size int, more ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	opts := strings.Join(append([]string{fmt.Sprintf("size=%d,mode=0700", size)}, more...), ",")
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// fill writes p until its filesystem is full.
func fill(t *testing.T, p string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	if f == nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// tailTotal is how much of a stream its tail file has seen.
func tailTotal(p string) int64 {
	f, err := os.Open(p)
	if err != nil {
		return -1
	}
	defer f.Close()
	total, _ := readTailHeader(f)
	return total
}

// TestFullStateDisk: a state dir that fills while a task runs costs the
// complete copy of its output, said so as "(unavailable)", never the bytes
// a read returns (no zeros where the disk refused a write) nor the truth
// of its status; a foreground call still runs.
func TestFullStateDisk(t *testing.T) {
	if !inNamespace(t, "--mount") {
		return
	}
	e := newTestEnv(t, "")
	mountTmpfs(t, e.stateDir, 5<<20)
	t.Cleanup(e.stopTasks) // before the unmount
	id := e.start("printf start; until [ -e go ]; do sleep 0.01; done; seq 1 100000; until [ -e go2 ]; do sleep 0.01; done", "A")
	tail := filepath.Join(e.stateDir, "tasks", id, "stdout.tail")
	waitFor(t, 10*time.Second, "the first output", func() bool { return tailTotal(tail) == 5 })
	if got := e.call(outputReq(id, "A", "")).text(); got != "start\n"+statusLine(taskStatus{State: stateRunning}) {
		t.Errorf("first read = %q", got)
	}
	fill(t, filepath.Join(e.stateDir, "filler-1"))
	os.WriteFile(filepath.Join(e.workspace, "go"), nil, 0o644)
	var want strings.Builder
	want.WriteString("start")
	for i := 1; i <= 100000; i++ {
		fmt.Fprintln(&want, i)
	}
	waitFor(t, 10*time.Second, "all the output", func() bool { return tailTotal(tail) == int64(want.Len()) })
	fill(t, filepath.Join(e.stateDir, "filler-2")) // what the dropped complete copy gave back
	os.WriteFile(filepath.Join(e.workspace, "go2"), nil, 0o644)
	r := e.waitDone(id, "A")
	var got taskOutputResult
	json.Unmarshal(r.StructuredContent, &got)
	if w := want.String(); got.Stdout != w[len(w)-64000:] {
		t.Errorf("stdout is not the last 64000 bytes of the output: %d bytes, %d NUL, ends %q",
			len(got.Stdout), strings.Count(got.Stdout, "\x00"), got.Stdout[max(0, len(got.Stdout)-20):])
	}
	if text := r.text(); !strings.HasSuffix(text, "\n[some output was dropped from memory; full output: (unavailable)]\n"+statusLine(taskStatus{State: stateCompleted})) {
		t.Errorf("read = ...%q", text[max(0, len(text)-200):])
	}
	if got := e.call(bashReq("echo still runs", "")).text(); got != "still runs\n" {
		t.Errorf("a foreground call on the full state dir = %q", got)
	}
	// A session's first call, which cannot record its workspace there:
	// unconfined it runs; confined (which needs the record) it is refused
	// with a clear error.
	if got := e.call(sessionCall("echo new session", "NEW", e.workspace, "")).text(); got != "new session\n" {
		t.Errorf("a new session's unconfined call on the full state dir = %q", got)
	}
	if sandboxSupport(os.Getenv).ABI >= 1 {
		e.config = filepath.Join(e.dir, "confined.toml")
		os.WriteFile(e.config, []byte("[sandbox]\nmode = \"workspace-write\"\n"), 0o600)
		r := e.call(sessionCall("echo confined", "NEW2", e.workspace, ""))
		if !r.IsError || !strings.Contains(r.text(), "the state dir is full") {
			t.Errorf("a new session's confined call on the full state dir = %q", r.text())
		}
	}
}

// TestStatusRetry: a supervisor that cannot record the final status keeps
// it and retries until the disk takes it.
func TestStatusRetry(t *testing.T) {
	if !inNamespace(t, "--mount") {
		return
	}
	e := newTestEnv(t, "")
	mountTmpfs(t, e.stateDir, 1<<20)
	t.Cleanup(e.stopTasks) // before the unmount
	id := e.start("until [ -e go ]; do sleep 0.01; done; echo done", "A")
	dir := filepath.Join(e.stateDir, "tasks", id)
	if err := os.Remove(filepath.Join(dir, "status.reserve")); err != nil {
		t.Fatal(err) // the room kept for the status is gone...
	}
	filler := filepath.Join(e.stateDir, "filler")
	fill(t, filler) // ...and so is every other
	os.WriteFile(filepath.Join(e.workspace, "go"), nil, 0o644)
	waitFor(t, 10*time.Second, "the output", func() bool { return tailTotal(filepath.Join(dir, "stdout.tail")) == 5 })
	time.Sleep(300 * time.Millisecond) // for the supervisor to try
	if fileExists(filepath.Join(dir, "status.json")) {
		t.Fatal("a status was written on a full disk without its reserve")
	}
	if got := e.call(outputReq(id, "A", "")).text(); got != "done\n"+statusLine(taskStatus{State: stateRunning}) {
		t.Errorf("read while the status waits for room = %q", got)
	}
	os.Remove(filler)
	if got := e.call(outputReq(id, "A", `"wait":true,"timeout_ms":10000`)).text(); got != textNoNewOutput+"\n"+statusLine(taskStatus{State: stateCompleted}) {
		t.Errorf("read once there is room = %q", got)
	}
}

// TestRingFullDisk: ring writes that a full disk refuses never show as
// bytes a read returns: the read reports the gap, and what was written
// before and after it is returned as it was.
func TestRingFullDisk(t *testing.T) {
	if !inNamespace(t, "--mount") {
		return
	}
	dir := filepath.Join(t.TempDir(), "small")
	mountTmpfs(t, dir, 64<<10)
	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	f, err := os.OpenFile(filepath.Join(dir, "stdout.tail"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	os.Truncate(filler, fileSize(filler)-4096) // room for the header's page only
	ring, err := newTailRing(f, 32<<10)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	write := func(n int) {
		b := make([]byte, n)
		for i := range b {
			b[i] = seqByte(off + int64(i))
		}
		ring.write(b)
		off += int64(n)
	}
	check := func(what string, cursor int64, wantFirst int64, wantLossy bool) int64 {
		t.Helper()
		r := readTaskStream(f.Name(), cursor, 1<<20)
		first := r.next - int64(len(r.data))
		if r.next != off || first != wantFirst || r.lossy != wantLossy {
			t.Errorf("%s: read [%d,%d) lossy %v, want [%d,%d) lossy %v", what, first, r.next, r.lossy, wantFirst, off, wantLossy)
		}
		for i, b := range r.data {
			if b != seqByte(first+int64(i)) {
				t.Fatalf("%s: byte %d is %q, want %q", what, first+int64(i), b, seqByte(first+int64(i)))
			}
		}
		return r.next
	}
	write(1000) // fits in the header's page
	cursor := check("before the disk refuses", 0, 0, false)
	write(10000) // needs pages the disk does not have
	gap := off
	os.Remove(filler)
	write(5000) // the file now reaches past the pages it never got
	cursor = check("past a refused write", cursor, gap, true)
	write(3000)
	check("after that", cursor, cursor, false)
}

// TestOpenOwnNotRegular: a FIFO or a directory where bashcall keeps a
// list is refused at once, never waited on.
func TestOpenOwnNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "spools")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readPrivate(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "is not a regular file") {
			t.Errorf("a FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO hangs")
	}
	if _, err := readPrivate(dir); err == nil {
		t.Errorf("a directory read as a list")
	}
}

// TestMakeBeneath: the directories of a new state or spool dir are made
// one at a time through descriptors, so that a symbolic link, or another
// user's directory, that appears on the way (in a sticky /tmp, between
// the check of the path and its making) is refused, and nothing is made
// where it points.
func TestMakeBeneath(t *testing.T) {
	dir := t.TempDir()
	elsewhere := filepath.Join(dir, "elsewhere")
	os.Mkdir(elsewhere, 0o755)
	os.Symlink(elsewhere, filepath.Join(dir, "link"))
	if err := makeBeneath(dir, "link/state"); err == nil || !strings.Contains(err.Error(), "is not a directory (a symbolic link put there?)") {
		t.Errorf("through a link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "state")); err == nil {
		t.Errorf("made through the link")
	}
	if err := makeBeneath(dir, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a", "b", "c")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("a/b/c: %v, %v", fi, err)
	}
	if os.Geteuid() != 0 {
		return
	}
	theirs := filepath.Join(dir, "theirs")
	os.Mkdir(theirs, 0o755)
	os.Chown(theirs, 65534, 65534)
	if err := makeBeneath(dir, "theirs/state"); err == nil || !strings.Contains(err.Error(), "was made by uid 65534") {
		t.Errorf("through their directory: %v", err)
	}
}

// TestHostileStateFiles: what another process of the user can put in the
// state dir (confined commands cannot reach it) neither hangs a call nor
// is followed: a FIFO as a dead call's record, which every invocation
// looks at, as a task's status or cursor, or as a session's standing
// mode; a symlink in place of a task's
// directory. Each call answers, and the symlink's target is untouched.
func TestHostileStateFiles(t *testing.T) {
	e := makeTestEnv(t, unconfined(t, "")) // the state dir, not the sandbox
	if text := e.call(sessionCall("echo started", "S", e.workspace, `"run_in_background":true`)).text(); text != textStarted("bash-1") {
		t.Fatalf("start: %q", text)
	}
	e.call(sessionReq("bash_output", `{"task_id":"bash-1","wait":true,"timeout_ms":10000}`, "S"))
	status := filepath.Join(e.stateDir, "tasks", "bash-1", "status.json")
	os.Remove(status)
	if err := unix.Mkfifo(status, 0o600); err != nil {
		t.Fatal(err)
	}
	cursor := filepath.Join(e.stateDir, "tasks", "bash-1", "cursor")
	os.Remove(cursor)
	mode := filepath.Join(sessionDir(e.stateDir, ownerKey("S")), "mode")
	for _, p := range []string{cursor, mode} {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(e.stateDir, "calls"), 0o700)
	if err := unix.Mkfifo(filepath.Join(e.stateDir, "calls", "999999-12345.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(e.dir, "elsewhere")
	os.Mkdir(elsewhere, 0o700)
	os.WriteFile(filepath.Join(elsewhere, "status.json"), []byte("mine\n"), 0o600)
	if err := os.Symlink(elsewhere, filepath.Join(e.stateDir, "tasks", "bash-7")); err != nil {
		t.Fatal(err)
	}
	for _, req := range []string{
		bashReq("echo hello", ""),
		sessionCall("echo hello", "S", e.workspace, ""),
		sessionReq("bash_list", `{}`, "S"),
		sessionReq("bash_output", `{"task_id":"bash-1"}`, "S"),
		sessionReq("bash_output", `{"task_id":"bash-7"}`, "S"),
		sessionReq("bash_kill", `{"task_id":"bash-7"}`, "S"),
	} {
		c := e.cmd()
		c.Stdin = strings.NewReader(req)
		done := make(chan []byte, 1)
		go func() { out, _ := c.Output(); done <- out }()
		select {
		case out := <-done:
			if !strings.HasPrefix(string(out), "{") {
				t.Errorf("%s answered %q", req, out)
			}
		case <-time.After(20 * time.Second):
			c.Process.Kill()
			<-done
			t.Errorf("%s hung", req)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(elsewhere, "status.json")); string(b) != "mine\n" {
		t.Errorf("a file the task dir's symlink leads to was written: %q", b)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 1 {
		t.Errorf("files were made where the task dir's symlink leads: %v", entries)
	}
}

// TestSupervisorPidReused: a supervisor's record whose pid and start
// time (ticks of 10 ms) now belong to another process, as when a
// supervisor dies within a tick of its start and its pid is reused at
// once, is not taken for the supervisor: bash_kill does not signal that
// process, which holds no lock on the record.
func TestSupervisorPidReused(t *testing.T) {
	e := makeTestEnv(t, unconfined(t, "")) // the state dir, not the sandbox
	if text := e.call(sessionCall("sleep 1000", "S", e.workspace, `"run_in_background":true`)).text(); text != textStarted("bash-1") {
		t.Fatalf("start: %q", text)
	}
	other := exec.Command("sleep", "1000")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- other.Wait() }()
	defer func() {
		other.Process.Kill()
		<-exited
	}()
	start, err := procStartTime(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	supPath := filepath.Join(e.stateDir, "tasks", "bash-1", "supervisor.json")
	var sup procRecord
	if err := readJSON(supPath, &sup); err != nil || !sup.Locked {
		t.Fatalf("the supervisor's record: %+v, %v", sup, err)
	}
	realSup := sup.PID
	defer syscall.Kill(realSup, syscall.SIGKILL)
	sup.PID, sup.Start = other.Process.Pid, start
	if err := writeJSON(supPath, &sup); err != nil {
		t.Fatal(err)
	}
	e.call(sessionReq("bash_kill", `{"task_id":"bash-1"}`, "S"))
	select {
	case err := <-exited:
		exited <- err
		t.Error("bash_kill signalled the process that took the supervisor's pid")
	case <-time.After(200 * time.Millisecond):
	}
}
