package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// spillConfig: a 1000-byte tail, 100000-byte copies, a 250000-byte cap
// (so a step of 4096 bytes).
const spillConfig = "max_output_bytes = 1000\nmax_spill_bytes = 100000\nmax_spill_total_bytes = 250000\ngrace_ms = 300\n"

// printN is a command printing n bytes of "X\n" lines.
func printN(letter string, n int) string {
	return fmt.Sprintf("yes %s | head -c %d", letter, n)
}

// wantN is what printN prints.
func wantN(letter string, n int) string {
	return strings.Repeat(letter+"\n", n/2)
}

// stdoutResult decodes a response's structured stdout.
func stdoutResult(t *testing.T, r wireResponse) streamResult {
	t.Helper()
	var sc foregroundResult
	if err := json.Unmarshal(r.StructuredContent, &sc); err != nil {
		t.Fatalf("structuredContent %s: %v", r.StructuredContent, err)
	}
	return sc.Stdout
}

// copiesSize sums every complete copy of a state dir: spill files and
// tasks' .log files.
func copiesSize(stateDir string) int64 {
	var n int64
	filepath.WalkDir(stateDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if strings.HasSuffix(filepath.Dir(p), "/spill") || strings.HasSuffix(p, ".log") && filepath.Base(p) != "supervisor.log" {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// liveCall is a call whose command waits for a file before it exits.
type liveCall struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	gate string
	done chan error
}

// startLive starts a call running command, then waiting for the gate
// file; ready is touched once command has run.
func (e *testEnv) startLive(command, name string) *liveCall {
	e.t.Helper()
	gate, ready := filepath.Join(e.workspace, name+".go"), filepath.Join(e.workspace, name+".ready")
	c := &liveCall{gate: gate, done: make(chan error, 1)}
	full := fmt.Sprintf("%s; touch %s; while [ ! -e %s ]; do sleep 0.02; done", command, ready, gate)
	c.cmd = e.cmd()
	c.cmd.Stdin = strings.NewReader(bashReq(full, `"timeoutMs":60000`))
	c.cmd.Stdout = &c.out
	if err := c.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	e.t.Cleanup(func() { os.WriteFile(gate, nil, 0o600); c.cmd.Process.Kill() })
	waitFor(e.t, 30*time.Second, name+" to print", func() bool { return fileExists(ready) })
	return c
}

// finish lets the command exit and returns the response.
func (c *liveCall) finish(t *testing.T) wireResponse {
	t.Helper()
	os.WriteFile(c.gate, nil, 0o600)
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("live call: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("live call did not finish")
	}
	return decodeResponse(t, c.out.String())
}

// spillFiles lists the spill directory.
func spillFiles(stateDir string) []string {
	files, _ := filepath.Glob(filepath.Join(stateDir, "spill", "*"))
	return files
}

// TestSpillEviction: past the cap the oldest finished copy goes first; a
// live call's copy survives although it is the oldest; the total stays
// under the cap.
func TestSpillEviction(t *testing.T) {
	e := newTestEnv(t, spillConfig)
	a := e.startLive(printN("A", 80000), "a")
	// The command has printed; bashcall copies what it read meanwhile.
	waitFor(t, 10*time.Second, "A's spill file", func() bool { return len(spillFiles(e.stateDir)) > 0 })
	if files := spillFiles(e.stateDir); len(files) != 1 {
		t.Fatalf("spill files while A runs: %v", files)
	}
	aPath := spillFiles(e.stateDir)[0]
	var paths []string
	for _, letter := range []string{"B", "C", "D"} {
		time.Sleep(20 * time.Millisecond) // distinct modification times
		r := e.call(bashReq(printN(letter, 80000), ""))
		s := stdoutResult(t, r)
		if s.SpillPath == "" {
			t.Fatalf("%s: no spill path: %s", letter, r.text())
		}
		paths = append(paths, s.SpillPath)
		if size := copiesSize(e.stateDir); size > 250000 {
			t.Errorf("after %s the copies hold %d bytes, over the 250000 cap", letter, size)
		}
	}
	if fileExists(paths[0]) {
		t.Errorf("B's copy (the oldest finished) survived D: %v", spillFiles(e.stateDir))
	}
	for i, letter := range []string{"C", "D"} {
		if b, err := os.ReadFile(paths[i+1]); err != nil || string(b) != wantN(letter, 80000) {
			t.Errorf("%s's copy: %d bytes, %v; want the whole stream", letter, len(b), err)
		}
	}
	r := a.finish(t)
	if s := stdoutResult(t, r); s.SpillPath != aPath {
		t.Fatalf("A's spill path = %q, want %q (text %q)", s.SpillPath, aPath, r.text())
	}
	if b, err := os.ReadFile(aPath); err != nil || string(b) != wantN("A", 80000) {
		t.Errorf("A's copy: %d bytes, %v; want the whole stream", len(b), err)
	}
}

// TestSpillCountsTasks: a settled task's complete copy counts and is
// evicted like a spill file, oldest first; a running task's copy is live.
func TestSpillCountsTasks(t *testing.T) {
	e := newTestEnv(t, spillConfig)
	settled := e.start(printN("T", 80000), "A")
	e.waitDone(settled, "A")
	time.Sleep(20 * time.Millisecond)
	running := e.start(printN("U", 80000)+"; sleep 300", "A")
	settledLog := e.taskFull(settled, "stdout")
	var runningLog string
	waitFor(t, 30*time.Second, "the running task's output", func() bool {
		runningLog = e.taskFull(running, "stdout")
		fi, err := os.Stat(runningLog)
		return runningLog != "" && err == nil && fi.Size() == 80000
	})
	var paths []string
	for _, letter := range []string{"F", "G"} {
		time.Sleep(20 * time.Millisecond)
		s := stdoutResult(t, e.call(bashReq(printN(letter, 80000), "")))
		if s.SpillPath == "" {
			t.Fatalf("%s: no spill path", letter)
		}
		paths = append(paths, s.SpillPath)
		if size := copiesSize(e.stateDir); size > 250000 {
			t.Errorf("after %s the copies hold %d bytes, over the 250000 cap", letter, size)
		}
	}
	if settledLog == "" || fileExists(settledLog) {
		t.Error("the settled task's copy (the oldest finished) survived")
	}
	if b, err := os.ReadFile(runningLog); err != nil || string(b) != wantN("U", 80000) {
		t.Errorf("the running task's copy: %d bytes, %v; want it whole", len(b), err)
	}
	for i, p := range paths {
		if !fileExists(p) {
			t.Errorf("spill %d (%s) was evicted", i, p)
		}
	}
}

// TestSpillNoRoom: a stream larger than the cap itself is given up.
func TestSpillNoRoom(t *testing.T) {
	e := newTestEnv(t, "max_output_bytes = 1000\nmax_spill_total_bytes = 50000\n")
	r := e.call(bashReq(printN("N", 80000), ""))
	if !strings.HasSuffix(r.text(), markerTruncated(textUnavailable)) {
		t.Errorf("text ends %q", r.text()[max(0, len(r.text())-80):])
	}
	if files := spillFiles(e.stateDir); len(files) != 0 {
		t.Errorf("spill files left: %v", files)
	}
}

// TestSpillGrant: the grant logic on real files, in process: oldest
// finished first, a live copy never, and nothing deleted for a copy that
// could not fit anyway.
func TestSpillGrant(t *testing.T) {
	state := t.TempDir()
	c := &spillCap{stateDir: state, limit: 100000} // step 4096
	live, err := c.create("*-stdout.log")
	if err != nil {
		t.Fatal(err)
	}
	defer live.release()
	if err := live.write(make([]byte, 20000)); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	var finished []string
	for i, size := range []int{30000, 10000, 25000} {
		p := filepath.Join(state, "spill", fmt.Sprintf("f%d", i))
		os.WriteFile(p, make([]byte, size), 0o600)
		mtime := old.Add(time.Duration(i) * time.Minute)
		os.Chtimes(p, mtime, mtime)
		finished = append(finished, p)
	}
	os.Chtimes(live.path, old.Add(-time.Hour), old.Add(-time.Hour)) // the oldest of all
	// In use: 20000+4096 live, 65000 finished. 60000 more does not fit
	// next to the live copy even with every finished one gone.
	if _, err := c.grant("new", 0, 76000); !errors.Is(err, errSpillFull) {
		t.Errorf("grant(76000) = %v, want errSpillFull", err)
	}
	for _, p := range append(finished, live.path) {
		if !fileExists(p) {
			t.Errorf("%s deleted for a grant that could not fit", p)
		}
	}
	// 30000 fits once f0 (the oldest finished) is gone.
	g, err := c.grant("new", 0, 30000)
	if err != nil || g < 30000 || g > 30000+4096 {
		t.Errorf("grant(30000) = %d, %v", g, err)
	}
	for i, p := range finished {
		if fileExists(p) != (i != 0) {
			t.Errorf("after grant(30000): %s exists = %v", p, fileExists(p))
		}
	}
	if !fileExists(live.path) {
		t.Error("the live copy was deleted")
	}
	live.release()
	// Released, the live copy is the oldest finished one and goes first.
	if _, err := c.grant("new", 0, 50000); err != nil {
		t.Errorf("grant(50000): %v", err)
	}
	if fileExists(live.path) || !fileExists(finished[1]) {
		t.Errorf("after release: live copy exists %v, f1 exists %v; want the released copy evicted first", fileExists(live.path), fileExists(finished[1]))
	}
}

// TestGCSkipsLiveSpill: gc -older-than 0s during a call leaves the spill
// file the call is writing; the response offers it whole; the next gc
// removes it.
func TestGCSkipsLiveSpill(t *testing.T) {
	e := newTestEnv(t, spillConfig)
	call := e.startLive(printN("L", 50000), "l")
	if r := e.run("", "gc", "-older-than", "0s"); r.code != 0 || r.stdout != "removed 0 finished tasks and 0 spill files\n" {
		t.Errorf("gc during the call: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	s := stdoutResult(t, call.finish(t))
	if b, err := os.ReadFile(s.SpillPath); err != nil || string(b) != wantN("L", 50000) {
		t.Fatalf("spill %q after gc: %d bytes, %v; want the whole stream", s.SpillPath, len(b), err)
	}
	if r := e.run("", "gc", "-older-than", "0s"); r.code != 0 || r.stdout != "removed 0 finished tasks and 1 spill files\n" {
		t.Errorf("gc after the call: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	if fileExists(s.SpillPath) {
		t.Error("gc left the finished call's spill file")
	}
}

// TestGCReadOnly: gc on a state dir it cannot change fails, naming each
// path and the error. As root, chmod stops nothing, so the state dir is
// bound read-only in a private mount namespace.
func TestGCReadOnly(t *testing.T) {
	probe := t.TempDir()
	if out, err := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && ! touch "$0/x" 2>/dev/null`, probe).CombinedOutput(); err != nil {
		t.Skipf("cannot bind a directory read-only in a private mount namespace (unshare -m, mount): %v %s", err, out)
	}
	e := newTestEnv(t, "max_output_bytes = 10\n")
	id := e.start("true", "A")
	e.waitDone(id, "A")
	spill := stdoutResult(t, e.call(bashReq("seq 1 100", ""))).SpillPath
	bashcall := e.cmd("gc", "-older-than", "0s")
	c := exec.Command("unshare", append([]string{"-m", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"`, e.stateDir}, bashcall.Args...)...)
	c.Env, c.Dir = bashcall.Env, bashcall.Dir
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	if code := c.ProcessState.ExitCode(); code != 1 {
		t.Errorf("gc on a read-only state dir: exit %d (%v), want 1; stdout %q stderr %q", code, err, out.String(), errb.String())
	}
	if out.String() != "removed 0 finished tasks and 0 spill files\n" {
		t.Errorf("stdout = %q", out.String())
	}
	for _, want := range []string{"bashcall: error: gc:", filepath.Join(e.stateDir, "tasks", id), spill, "read-only file system"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr %q does not name %q", errb.String(), want)
		}
	}
	if !fileExists(spill) || !fileExists(filepath.Join(e.stateDir, "tasks", id)) {
		t.Error("the read-only state dir changed")
	}
}
