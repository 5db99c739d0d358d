package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spoolServer is a running bashcall serve.
type spoolServer struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

// serve starts bashcall serve on dir.
func (e *testEnv) serve(dir string, args ...string) *spoolServer {
	e.t.Helper()
	return e.startServe(e.cmd(append([]string{"serve", "-spool", dir}, args...)...), dir)
}

// startServe starts c, a bashcall serve, and waits for it to make the spool
// directories in dir.
func (e *testEnv) startServe(c *exec.Cmd, dir string) *spoolServer {
	e.t.Helper()
	s := &spoolServer{cmd: c, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	c.Stderr = s.stderr
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { s.done <- c.Wait() }()
	e.t.Cleanup(func() {
		c.Process.Kill()
		<-s.done
	})
	waitFor(e.t, 10*time.Second, "the spool directories", func() bool {
		_, err := os.Stat(filepath.Join(dir, "out"))
		return err == nil
	})
	return s
}

// stop sends sig and waits for serve to exit.
func (s *spoolServer) stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	s.cmd.Process.Signal(sig)
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit")
		return nil
	}
}

// drop writes a call the way a client does: into tmp/, then renamed to new/.
func drop(t *testing.T, dir, name, call string) {
	t.Helper()
	dropEntry(t, dir, name, func(p string) error { return os.WriteFile(p, []byte(call), 0o600) })
}

// dropEntry makes an entry of any kind the way a client drops a call: in
// tmp/, then renamed to new/, so that serve never sees it half made.
func dropEntry(t *testing.T, dir, name string, create func(string) error) {
	t.Helper()
	tmp := filepath.Join(dir, "tmp", name)
	if err := create(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "new", name)); err != nil {
		t.Fatal(err)
	}
}

// awaitResponse waits for out/NAME.json and decodes it.
func awaitResponse(t *testing.T, dir, name string) wireResponse {
	t.Helper()
	p := filepath.Join(dir, "out", strings.TrimSuffix(name, ".json")+".json")
	var b []byte
	waitFor(t, 30*time.Second, "response "+p, func() bool {
		var err error
		b, err = os.ReadFile(p)
		return err == nil
	})
	return decodeResponse(t, string(b))
}

// TestSpoolConcurrent: many calls, several workers, answered in parallel
// time, each exactly once.
func TestSpoolConcurrent(t *testing.T) {
	e := newTestEnv(t, "")
	dir := filepath.Join(e.dir, "spool")
	e.serve(dir, "-workers", "8")
	start := time.Now()
	for i := 0; i < 16; i++ {
		drop(t, dir, fmt.Sprintf("c%02d.json", i), fmt.Sprintf(`{"id":"c%d","name":"bash","arguments":{"command":"sleep 0.5; echo %d >> runs; echo done-%d","description":"d"}}`, i, i, i))
	}
	for i := 0; i < 16; i++ {
		r := awaitResponse(t, dir, fmt.Sprintf("c%02d.json", i))
		if r.text() != fmt.Sprintf("done-%d\n", i) || string(r.ID) != fmt.Sprintf(`"c%d"`, i) {
			t.Errorf("c%02d: id %s text %q", i, r.ID, r.text())
		}
	}
	took := time.Since(start)
	t.Logf("16 calls of 0.5s with 8 workers: %v", took)
	if took > 16*500*time.Millisecond/2 {
		t.Errorf("16 calls of 0.5s with 8 workers took %v: not answered in parallel", took)
	}
	b, _ := os.ReadFile(filepath.Join(e.workspace, "runs"))
	if n := strings.Count(string(b), "\n"); n != 16 {
		t.Errorf("%d runs for 16 calls", n)
	}
	for _, sub := range []string{"new", "cur", "tmp"} {
		if left, _ := os.ReadDir(filepath.Join(dir, sub)); len(left) != 0 {
			t.Errorf("%s/ still holds %d entries", sub, len(left))
		}
	}
}

// TestSpoolTwoServers: two serve processes on one directory run each call
// exactly once.
func TestSpoolTwoServers(t *testing.T) {
	e := newTestEnv(t, "")
	dir := filepath.Join(e.dir, "spool")
	servers := []*spoolServer{e.serve(dir, "-workers", "4"), e.serve(dir, "-workers", "4")}
	const calls = 40
	for i := 0; i < calls; i++ {
		drop(t, dir, fmt.Sprintf("c%02d.json", i), fmt.Sprintf(`{"name":"bash","arguments":{"command":"echo %d >> runs","description":"d"}}`, i))
	}
	for i := 0; i < calls; i++ {
		awaitResponse(t, dir, fmt.Sprintf("c%02d.json", i))
	}
	b, _ := os.ReadFile(filepath.Join(e.workspace, "runs"))
	seen := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		seen[l]++
	}
	if len(seen) != calls {
		t.Errorf("%d distinct calls ran, want %d", len(seen), calls)
	}
	for l, n := range seen {
		if n != 1 {
			t.Errorf("call %s ran %d times", l, n)
		}
	}
	for _, s := range servers {
		s.stop(t, syscall.SIGTERM)
		if log := s.stderr.String(); strings.Count(log, "\n") != 1 {
			t.Errorf("serve logged more than its start: %s", log)
		}
	}
}

// TestSpoolCrash: kill -9 of serve mid-call, then a restart: the call is
// answered as interrupted and did not run twice.
func TestSpoolCrash(t *testing.T) {
	e := newTestEnv(t, "grace_ms = 300\n")
	dir := filepath.Join(e.dir, "spool")
	s := e.serve(dir)
	drop(t, dir, "long.json", `{"id":"long","name":"bash","arguments":{"command":"echo $$ > pid; echo ran >> runs; sleep 300","description":"d"}}`)
	waitFor(t, 10*time.Second, "the call to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(e.workspace, "runs"))
		return len(b) > 0
	})
	s.stop(t, syscall.SIGKILL)
	if _, err := os.Stat(filepath.Join(dir, "cur", "long.json")); err != nil {
		t.Fatalf("the claim is not in cur/: %v", err)
	}
	e.serve(dir)
	r := awaitResponse(t, dir, "long.json")
	golden(t, "interrupted", r.text())
	if string(r.ID) != `"long"` || !r.IsError {
		t.Errorf("response = %+v", r)
	}
	time.Sleep(500 * time.Millisecond)
	if b, _ := os.ReadFile(filepath.Join(e.workspace, "runs")); string(b) != "ran\n" {
		t.Errorf("runs = %q, want one run", b)
	}
	pid := readPIDs(t, filepath.Join(e.workspace, "pid"))[0]
	waitFor(t, 10*time.Second, "the interrupted command to be stopped", func() bool { return !pidAlive(pid) })
}

// TestSpoolSignal: SIGTERM stops claiming, lets a short call finish,
// aborts a long one after grace_ms, answers both and exits 0.
func TestSpoolSignal(t *testing.T) {
	e := newTestEnv(t, "grace_ms = 1000\n")
	dir := filepath.Join(e.dir, "spool")
	s := e.serve(dir, "-workers", "2")
	drop(t, dir, "short.json", `{"name":"bash","arguments":{"command":"echo s >> started; sleep 0.5; echo short","description":"d"}}`)
	drop(t, dir, "long.json", `{"name":"bash","arguments":{"command":"echo l >> started; sleep 300","description":"d"}}`)
	waitFor(t, 10*time.Second, "both calls to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(e.workspace, "started"))
		return len(b) == 4
	})
	start := time.Now()
	if err := s.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve exit: %v\n%s", err, s.stderr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("serve took %v to stop", took)
	}
	if got := awaitResponse(t, dir, "short.json").text(); got != "short\n" {
		t.Errorf("short = %q", got)
	}
	if got := awaitResponse(t, dir, "long.json").text(); got != "Error: command aborted" {
		t.Errorf("long = %q", got)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "cur")); len(left) != 0 {
		t.Errorf("cur/ holds %d claims after a clean stop", len(left))
	}
}

// TestSpoolBadFiles: every kind of bad entry gets an error response (or is
// moved aside) and serving goes on.
func TestSpoolBadFiles(t *testing.T) {
	e := newTestEnv(t, "")
	dir := filepath.Join(e.dir, "spool")
	e.serve(dir)
	newDir := filepath.Join(dir, "new")
	file := func(data []byte, mode os.FileMode) func(string) error {
		return func(p string) error { return os.WriteFile(p, data, mode) }
	}
	for name, create := range map[string]func(string) error{
		"garbage.json":    file([]byte("\x00\xffnot json"), 0o600),
		"big.json":        file(bytes.Repeat([]byte("x"), maxRequestBytes+10), 0o600),
		"empty.json":      file(nil, 0o600),
		"adir.json":       func(p string) error { return os.Mkdir(p, 0o700) },
		"link.json":       func(p string) error { return os.Symlink("/etc/passwd", p) },
		"fifo.json":       func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"socket.json":     func(p string) error { return syscall.Mknod(p, syscall.S_IFSOCK|0o600, 0) }, // open fails: ENXIO
		"unreadable.json": file([]byte(`{"name":"bash_list"}`), 0o000),
		".hidden":         file([]byte(`{"name":"bash_list"}`), 0o600),
		// No response name can be derived (over 200 bytes), and the
		// name rejected/ files it under must still fit in 255.
		strings.Repeat("l", 240) + ".json": file([]byte(`{"name":"bash_list"}`), 0o600),
		strings.Repeat("m", 255):           file([]byte(`{"name":"bash_list"}`), 0o600),
	} {
		dropEntry(t, dir, name, create)
	}
	var texts []string
	for _, name := range []string{"garbage", "big", "empty", "adir", "link", "fifo", "socket"} {
		texts = append(texts, name+": "+awaitResponse(t, dir, name+".json").text())
	}
	golden(t, "responses", strings.Join(texts, "\n"))
	if r := awaitResponse(t, dir, "unreadable.json"); os.Geteuid() != 0 && !r.IsError {
		t.Errorf("unreadable: %q", r.text())
	}
	waitFor(t, 10*time.Second, "the hidden and long-named entries to be moved aside", func() bool {
		left, _ := os.ReadDir(newDir)
		return len(left) == 0
	})
	for _, prefix := range []string{".hidden.", strings.Repeat("l", 180) + "-", strings.Repeat("m", 180) + "-"} {
		if aside, _ := filepath.Glob(filepath.Join(dir, "rejected", prefix+"*")); len(aside) != 1 {
			t.Errorf("rejected/ holds %d entries named %.20q…, want 1", len(aside), prefix)
		}
	}
	drop(t, dir, "good.json", `{"name":"bash","arguments":{"command":"echo still serving","description":"d"}}`)
	if got := awaitResponse(t, dir, "good.json").text(); got != "still serving\n" {
		t.Errorf("after the bad files: %q", got)
	}
}

// spoolDir makes a spool dir in the env, as serve would, before it runs.
func (e *testEnv) spoolDir() string {
	e.t.Helper()
	dir := filepath.Join(e.dir, "spool")
	for _, sub := range []string{"tmp", "new", "cur", "out"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			e.t.Fatal(err)
		}
	}
	return dir
}

// TestSpoolOnce: -once answers what is waiting and exits.
func TestSpoolOnce(t *testing.T) {
	e := newTestEnv(t, "")
	dir := e.spoolDir()
	for i := 0; i < 5; i++ {
		drop(t, dir, fmt.Sprintf("c%d.json", i), fmt.Sprintf(`{"name":"bash","arguments":{"command":"echo %d","description":"d"}}`, i))
	}
	r := e.run("", "serve", "-spool", dir, "-once")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for i := 0; i < 5; i++ {
		if got := awaitResponse(t, dir, fmt.Sprintf("c%d.json", i)).text(); got != fmt.Sprintf("%d\n", i) {
			t.Errorf("c%d = %q", i, got)
		}
	}
}

// TestSpoolOneResponseName: NAME and NAME.json share the response
// NAME.json; dropped together, with workers to run both at once, only one
// runs, and the other is moved aside unrun.
func TestSpoolOneResponseName(t *testing.T) {
	e := newTestEnv(t, "")
	dir := filepath.Join(e.dir, "spool")
	e.serve(dir, "-workers", "2")
	drop(t, dir, "dup", gatedCall("dup"))
	e.awaitRuns("dup\n")
	drop(t, dir, "dup.json", gatedCall("dup.json"))
	waitFor(t, 10*time.Second, "the second call moved aside", func() bool {
		aside, _ := filepath.Glob(filepath.Join(dir, "rejected", "dup.json.*"))
		return len(aside) == 1
	})
	os.WriteFile(filepath.Join(e.workspace, "go"), nil, 0o600)
	if got := awaitResponse(t, dir, "dup.json").text(); got != "answer-dup\n" {
		t.Errorf("out/dup.json = %q", got)
	}
	time.Sleep(200 * time.Millisecond)
	if b, _ := os.ReadFile(filepath.Join(e.workspace, "runs")); string(b) != "dup\n" {
		t.Errorf("runs = %q; want the first call alone", b)
	}
}

// TestSpoolLikeStdin: sessions, background tasks, notices, the sandbox and
// escalation through the request's approval work through the spool.
func TestSpoolLikeStdin(t *testing.T) {
	e := newConfinedEnv(t, "[sandbox]\nmode = \"read-only\"\n")
	dir := filepath.Join(e.dir, "spool")
	e.serve(dir)
	call := func(name, req string) wireResponse {
		drop(t, dir, name+".json", req)
		return awaitResponse(t, dir, name)
	}
	if got := call("start", startReq("echo bg", "A")).text(); got != textStarted("bash-1") {
		t.Fatalf("start = %q", got)
	}
	if got := call("read", outputReq("bash-1", "A", `"wait":true`)).text(); got != "bg\n"+statusLine(taskStatus{State: stateCompleted}) {
		t.Errorf("read = %q", got)
	}
	if got := call("other", outputReq("bash-1", "B", "")).text(); got != "Error: task bash-1 belongs to another session" {
		t.Errorf("fence = %q", got)
	}
	if got := call("denied", bashReq("echo x > f", "")).text(); !strings.Contains(got, markerDenied(modeReadOnly)) {
		t.Errorf("sandbox = %q", got)
	}
	esc := `{"name":"bash","arguments":{"command":"echo x > f && echo wrote","description":"d","sandbox_permissions":"workspace-write","justification":"write f"},"approval":"allowed-once"}`
	if got := call("escalated", esc).text(); got != "wrote\n" {
		t.Errorf("escalation = %q", got)
	}
	e.call(startReq("sleep 0.1", "C")) // settles after its start has answered
	e.awaitSettled("bash-2")
	if r := call("notice", sessionReq("bash_list", "{}", "C")); len(r.Notices) != 1 {
		t.Errorf("notices = %v", r.Notices)
	}
	if got := call("spool-protected", `{"name":"bash","arguments":{"command":"echo x > f","description":"d","sandbox_permissions":"workspace-write","justification":"write f"},"approval":"allowed-once","session":{"cwd":`+jsonString(filepath.Join(dir, "tmp"))+`}}`).text(); !strings.Contains(got, "overlaps "+jsonString(dir)) {
		t.Errorf("a workspace holding the spool: %q", got)
	}
}

// TestSpoolIdle: an idle serve uses no CPU.
func TestSpoolIdle(t *testing.T) {
	e := newTestEnv(t, "")
	s := e.serve(filepath.Join(e.dir, "spool"))
	time.Sleep(300 * time.Millisecond)
	cpu := func() uint64 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		var u, k uint64
		fmt.Sscan(f[11], &u)
		fmt.Sscan(f[12], &k)
		return u + k
	}
	before := cpu()
	time.Sleep(2 * time.Second)
	if used := cpu() - before; used > 1 {
		t.Errorf("idle serve used %d clock ticks in 2s", used)
	}
}

// TestSpoolAnsweredOnce: a response already in out/ is never replaced. A
// serve killed after writing it but before releasing the claim leaves the
// call in cur/: the restart removes the claim and does not answer it
// "interrupted"; a new call under an answered name is not run.
func TestSpoolAnsweredOnce(t *testing.T) {
	e := newTestEnv(t, "")
	dir := filepath.Join(e.dir, "spool")
	makeSpool(t, dir)
	drop(t, dir, "fresh.json", `{"name":"bash","arguments":{"command":"echo fresh","description":"d"}}`)
	call := `{"name":"bash","arguments":{"command":"echo ran >> runs","description":"d"}}`
	real := `{"content":[{"type":"text","text":"the real answer"}]}` + "\n"
	for name, where := range map[string]string{"claimed.json": "cur", ".ran.unanswered.json": "cur", "again.json": "new"} {
		if err := os.WriteFile(filepath.Join(dir, where, name), []byte(call), 0o600); err != nil {
			t.Fatal(err)
		}
		resp := strings.TrimPrefix(name, ranPrefix)
		if err := os.WriteFile(filepath.Join(dir, "out", resp), []byte(real), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := e.run("", "serve", "-spool", dir, "-once")
	if r.code != 0 {
		t.Fatalf("serve exit %d: %s", r.code, r.stderr)
	}
	if got := awaitResponse(t, dir, "fresh.json").text(); got != "fresh\n" {
		t.Errorf("the call beside them: %q", got)
	}
	for _, name := range []string{"claimed.json", "unanswered.json", "again.json"} {
		if b, _ := os.ReadFile(filepath.Join(dir, "out", name)); string(b) != real {
			t.Errorf("out/%s = %q, want the real answer kept", name, b)
		}
	}
	for _, sub := range []string{"cur", "new"} {
		if left, _ := os.ReadDir(filepath.Join(dir, sub)); len(left) != 0 {
			t.Errorf("%s/ still holds %d entries", sub, len(left))
		}
	}
	if _, err := os.Stat(filepath.Join(e.workspace, "runs")); err == nil {
		t.Error("a call under an answered name ran")
	}
	if !strings.Contains(r.stderr, "out/ already holds a response named again.json; the call was not run") {
		t.Errorf("stderr = %q", r.stderr)
	}
}

// gatedCall is a call that records it started in runs and answers
// "answer-NAME" once the file go exists in the workspace.
func gatedCall(name string) string {
	return `{"name":"bash","arguments":{"command":"echo ` + name + ` >> runs; while [ ! -e go ]; do sleep 0.02; done; echo answer-` + name + `","description":"d"}}`
}

// awaitRuns waits until the workspace's runs file reads want.
func (e *testEnv) awaitRuns(want string) {
	e.t.Helper()
	waitFor(e.t, 20*time.Second, "runs to read "+strconv.Quote(want), func() bool {
		b, _ := os.ReadFile(filepath.Join(e.workspace, "runs"))
		return string(b) == want
	})
}

// TestSpoolRetry: a response that cannot be written (out/ is gone for a
// while) is kept and written once it can be, without holding up the only
// worker, and is not answered "interrupted" meanwhile.
func TestSpoolRetry(t *testing.T) {
	e := newTestEnv(t, "")
	dir := filepath.Join(e.dir, "spool")
	s := e.serve(dir, "-workers", "1")
	drop(t, dir, "a.json", gatedCall("a"))
	e.awaitRuns("a\n")
	out, away := filepath.Join(dir, "out"), filepath.Join(dir, "out.away")
	if err := os.Rename(out, away); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(e.workspace, "go"), nil, 0o600)
	drop(t, dir, "b.json", `{"name":"bash","arguments":{"command":"echo b >> runs; echo answer-b","description":"d"}}`)
	e.awaitRuns("a\nb\n") // the one worker took b while a's response waited
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "cur", "a.json")); err != nil {
		t.Fatalf("a's claim was released before it was answered: %v", err)
	}
	if err := os.Rename(away, out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if got := awaitResponse(t, dir, name+".json").text(); got != "answer-"+name+"\n" {
			t.Errorf("%s = %q", name, got)
		}
	}
	waitFor(t, 10*time.Second, "cur/ to empty", func() bool {
		left, _ := os.ReadDir(filepath.Join(dir, "cur"))
		return len(left) == 0
	})
	if err := s.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve exit: %v", err)
	}
	if !strings.Contains(s.stderr.String(), "a.json: the response is written") {
		t.Errorf("stderr = %q", s.stderr)
	}
}

// TestSpoolStopUnanswered: serve stopped while a response still cannot be
// written exits after grace_ms; the restart answers that the call ran (it
// did), not that serve stopped before answering, and does not run it again.
func TestSpoolStopUnanswered(t *testing.T) {
	e := newTestEnv(t, "grace_ms = 300\n")
	dir := filepath.Join(e.dir, "spool")
	s := e.serve(dir)
	drop(t, dir, "a.json", `{"id":"a","name":"bash","arguments":{"command":"echo a >> runs; while [ ! -e go ]; do sleep 0.02; done; echo > finished","description":"d"}}`)
	e.awaitRuns("a\n")
	out, away := filepath.Join(dir, "out"), filepath.Join(dir, "out.away")
	if err := os.Rename(out, away); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(e.workspace, "go"), nil, 0o600)
	waitFor(t, 10*time.Second, "a to finish", func() bool {
		_, err := os.Stat(filepath.Join(e.workspace, "finished"))
		return err == nil
	})
	time.Sleep(300 * time.Millisecond) // for serve to try writing the response
	if err := s.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve exit: %v\n%s", err, s.stderr)
	}
	if !strings.Contains(s.stderr.String(), "a.json: ") || !strings.Contains(s.stderr.String(), "stopping with the call unanswered") {
		t.Errorf("stderr = %q", s.stderr)
	}
	if err := os.Rename(away, out); err != nil {
		t.Fatal(err)
	}
	if r := e.run("", "serve", "-spool", dir, "-once"); r.code != 0 {
		t.Fatalf("restart: exit %d: %s", r.code, r.stderr)
	}
	r := awaitResponse(t, dir, "a.json")
	golden(t, "unanswered", r.text())
	if string(r.ID) != `"a"` || !r.IsError {
		t.Errorf("response = %+v", r)
	}
	e.awaitRuns("a\n")
	if left, _ := os.ReadDir(filepath.Join(dir, "cur")); len(left) != 0 {
		t.Errorf("cur/ still holds %d entries", len(left))
	}
}

// TestSpoolWarmChild: serve starts the bashcall process of its next call
// ahead of it. That child sees the config as it is when the call comes,
// one killed while waiting is replaced, and none is left when serve stops.
func TestSpoolWarmChild(t *testing.T) {
	e := newTestEnv(t, "[env]\nset = { WHICH = \"before\" }\n")
	dir := filepath.Join(e.dir, "spool")
	s := e.serve(dir, "-workers", "1")
	// serve's child once it is bashcall: serve may run short-lived
	// others (a probe) as it starts.
	var warm string
	var cmd []byte
	waitFor(t, 10*time.Second, "a warm child", func() bool {
		for _, kid := range childrenOf(s.cmd.Process.Pid) {
			if cmd, _ = os.ReadFile("/proc/" + kid + "/cmdline"); strings.HasPrefix(string(cmd), "bashcall\x00") {
				warm = kid
				return true
			}
		}
		return false
	})
	if !strings.Contains(string(cmd), "\x00-warm\x00") {
		t.Errorf("the child started ahead of its call does not warm up: %q", cmd)
	}
	time.Sleep(200 * time.Millisecond) // well into its wait for a request
	if err := os.WriteFile(e.config, []byte("[sandbox]\nmode = \"danger-full-access\"\n[env]\nset = { WHICH = \"after\" }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	drop(t, dir, "a.json", bashReq(`echo "$WHICH $PPID"`, ""))
	if got := awaitResponse(t, dir, "a.json").text(); !strings.HasPrefix(got, "after ") {
		t.Errorf("the warm child ran the call with the config of its start: %q", got)
	}
	var next string
	waitFor(t, 10*time.Second, "the next warm child", func() bool {
		kids := childrenOf(s.cmd.Process.Pid)
		if len(kids) == 1 && kids[0] != warm {
			next = kids[0]
		}
		return next != ""
	})
	// A child that dies while it waits (not at the moment it is handed
	// its call, which is a call lost as with any killed bashcall).
	pid, _ := strconv.Atoi(next)
	start, _ := procStartTime(pid)
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, 10*time.Second, "the killed child's end", func() bool { return !processAlive(pid, start) })
	drop(t, dir, "b.json", bashReq("echo answered", ""))
	if got := awaitResponse(t, dir, "b.json").text(); got != "answered\n" {
		t.Errorf("after its warm child was killed: %q", got)
	}
	waitFor(t, 10*time.Second, "a warm child again", func() bool { return len(childrenOf(s.cmd.Process.Pid)) == 1 })
	last, _ := strconv.Atoi(childrenOf(s.cmd.Process.Pid)[0])
	if err := s.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}
	if syscall.Kill(last, 0) == nil {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", last)); !strings.Contains(string(b), ") Z") {
			t.Errorf("the waiting child %d outlived serve: %s", last, b)
		}
	}
	if left := callProcesses(e.stateDir); len(left) > 0 {
		t.Errorf("bashcall processes of serve outlived it: %v", left)
	}
}

// callProcesses lists the live bashcall processes that answer calls in
// stateDir (what serve and mcp start), as "pid cmdline".
func callProcesses(stateDir string) []string {
	var found []string
	for pid, s := range scanProcs() {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !s.zombie && strings.HasPrefix(string(cmd), "bashcall\x00-state-dir\x00"+stateDir+"\x00") {
			found = append(found, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmd), "\x00", " ")))
		}
	}
	return found
}
