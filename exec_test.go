package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestForegroundText runs real commands through the binary and compares
// the model-facing text of every foreground shape with its golden file.
// The denials need a confined run; the other shapes are the same in any
// mode.
func TestForegroundText(t *testing.T) {
	const small = "max_output_bytes = 64\nmax_spill_bytes = 4096\ngrace_ms = 300\n"
	tests := []struct {
		name, config, command, extra string
		confined                     bool
		needs                        func(*testing.T) // beyond Landlock
	}{
		{name: "plain", command: "echo hello"},
		{name: "no_output", command: "true"},
		{name: "stderr_only", command: "echo oops >&2"},
		{name: "both_streams", command: "echo out; echo err >&2"},
		{name: "separator", command: "printf 'no newline'; echo err >&2"},
		{name: "exit_code", command: "echo partial; exit 3"},
		{name: "exit_code_no_output", command: "exit 7"},
		{name: "signal", command: "echo before; kill -TERM $$"},
		{name: "timeout_signal", config: "grace_ms = 300\n", command: "echo started; sleep 10", extra: `"timeoutMs":200`},
		{name: "timeout_exit_0", config: "grace_ms = 300\n", command: "trap 'exit 0' TERM; echo started; sleep 10 & wait", extra: `"timeoutMs":200`},
		{name: "timeout_killed", config: "grace_ms = 300\n", command: "trap '' TERM; echo stubborn; sleep 10", extra: `"timeoutMs":200`},
		{name: "truncated_path", config: small, command: "seq 1 100"},
		{name: "truncated_unavailable", config: small, command: "seq 1 2000"},
		{name: "truncated_both", config: small, command: "seq 1 100; seq 101 200 >&2"},
		{name: "truncated_stderr_exit", config: small, command: "seq 1 2000 >&2; exit 2"},
		{name: "exact_limit", config: small, command: "printf '%064d' 0"},
		{name: "invalid_utf8", command: `printf 'ok \xff\xfe \x00 nul\n'`},
		{name: "denied", command: "echo trying; touch /etc/bashcall-denied-test", confined: true, needs: rootMountNS},
		{name: "denied_policy_never", config: "[approval]\npolicy = \"never\"\n", command: "touch /etc/bashcall-denied-test", confined: true, needs: rootMountNS},
		{name: "denied_read_only", config: "[sandbox]\nmode = \"read-only\"\n", command: "echo x > denied.txt", confined: true, needs: anyMountNS},
		{name: "full_access_no_denial", config: "[sandbox]\nmode = \"danger-full-access\"\n", command: "ls /nonexistent-bashcall-path"},
		{name: "no_tty", command: "echo hi > /dev/tty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newEnv := newTestEnv
			if tt.confined {
				newEnv = newConfinedEnv
			}
			e := newEnv(t, tt.config)
			if tt.needs != nil {
				tt.needs(t)
			}
			r := e.call(bashReq(tt.command, tt.extra))
			if r.IsError {
				t.Fatalf("isError for %q: %s", tt.command, r.text())
			}
			golden(t, tt.name, e.scrub(r.text()))
		})
	}
}

// rootMountNS skips a test whose golden shows a write to /etc failing with
// the read-only file system of the private mount namespace bashcall makes
// as root; for another user, file permissions refuse it first.
func rootMountNS(t *testing.T) {
	t.Helper()
	if mountNamespace() != nsMount {
		t.Skip("needs root: the golden's error is the read-only file system of the mount namespace bashcall makes with CAP_SYS_ADMIN")
	}
}

// anyMountNS skips a test whose golden shows the read-only file system of
// bashcall's private mount namespace, which it has as root or through a
// user namespace, and not with BASHCALL_PROTECT=snapshot.
func anyMountNS(t *testing.T) {
	t.Helper()
	if mountNamespace() == nsNone {
		t.Skip("needs a private mount namespace (root, or user namespaces): the golden's error is its read-only file system")
	}
}

// TestForegroundStructured checks structuredContent, the sandbox facts of
// a confined run among it, and the cards.
func TestForegroundStructured(t *testing.T) {
	e := newConfinedEnv(t, "max_output_bytes = 8\ngrace_ms = 300\n")
	r := e.call(`{"id":"call_1","name":"bash","arguments":{"command":"echo 123456789; echo e >&2; exit 2","description":"Count","workdir":"."}}`)
	var got foregroundResult
	if err := json.Unmarshal(r.StructuredContent, &got); err != nil {
		t.Fatal(err)
	}
	if string(r.ID) != `"call_1"` || r.Name != "bash" {
		t.Errorf("id, name = %s, %q; want \"call_1\", bash", r.ID, r.Name)
	}
	if got.ExitCode == nil || *got.ExitCode != 2 || got.Signal != nil || got.TimeoutMs != 120000 {
		t.Errorf("exit fields = %v %v %d", got.ExitCode, got.Signal, got.TimeoutMs)
	}
	if !got.Stdout.Truncated || got.Stdout.Text != "3456789\n" || got.Stdout.SpillPath == "" {
		t.Errorf("stdout = %+v, want the 8-byte tail with a spill path", got.Stdout)
	}
	spill, err := os.ReadFile(got.Stdout.SpillPath)
	if err != nil || string(spill) != "123456789\n" {
		t.Errorf("spill file = %q, %v; want the whole stream", spill, err)
	}
	fi, err := os.Stat(got.Stdout.SpillPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("spill file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	di, err := os.Stat(filepath.Dir(got.Stdout.SpillPath))
	if err != nil || di.Mode().Perm() != 0o700 || filepath.Dir(filepath.Dir(got.Stdout.SpillPath)) != e.stateDir {
		t.Errorf("spill dir %s mode = %v, %v; want 0700 under the state dir", filepath.Dir(got.Stdout.SpillPath), di.Mode(), err)
	}
	if got.Sandbox == nil || got.Sandbox.Mode != modeWorkspaceWrite || got.Sandbox.Enforcement == "" {
		t.Errorf("sandbox = %+v", got.Sandbox)
	}
	golden(t, "present", e.scrub(string(r.Present)))
}

// TestTimeoutKillsEscapees: a timeout stops descendants that left the
// group with setsid and a double fork, and a TERM-ignoring command.
func TestTimeoutKillsEscapees(t *testing.T) {
	e := newTestEnv(t, "grace_ms = 500\n")
	pidFile := filepath.Join(e.workspace, "pids")
	cmd := fmt.Sprintf(`trap '' TERM
setsid sleep 300 & a=$!
( setsid sh -c 'sleep 301 & echo $! > %[1]s.inner' & )
until [ -s %[1]s.inner ]; do sleep 0.01; done
echo "$a $$ $(cat %[1]s.inner)" > %[1]s
sleep 300`, pidFile)
	start := time.Now()
	r := e.call(bashReq(cmd, `"timeoutMs":300`))
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v", took)
	}
	if !strings.Contains(r.text(), markerTimedOut(300)) || !strings.HasSuffix(r.text(), markerSignal("SIGKILL")) {
		t.Errorf("text = %q", r.text())
	}
	for _, pid := range readPIDs(t, pidFile) {
		if pidAlive(pid) {
			t.Errorf("pid %d survived the timeout", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestHeldPipe: a descendant holding the output pipes delays the answer
// by at most grace_ms, and is stopped.
func TestHeldPipe(t *testing.T) {
	e := newTestEnv(t, "grace_ms = 400\n")
	pidFile := filepath.Join(e.workspace, "pid")
	start := time.Now()
	r := e.call(bashReq("sleep 100 & echo $! > "+pidFile+"; echo started", ""))
	took := time.Since(start)
	if r.text() != "started\n" {
		t.Errorf("text = %q", r.text())
	}
	if took < 400*time.Millisecond || took > 5*time.Second {
		t.Errorf("answered after %v; want about grace_ms (400ms)", took)
	}
	for _, pid := range readPIDs(t, pidFile) {
		if pidAlive(pid) {
			t.Errorf("held-pipe sleeper %d survived the call", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitExit waits at most 10 seconds for p to end, and kills it after that.
func waitExit(t *testing.T, p *os.Process) syscall.WaitStatus {
	t.Helper()
	done := make(chan *os.ProcessState, 1)
	go func() {
		st, _ := p.Wait()
		done <- st
	}()
	select {
	case st := <-done:
		return st.Sys().(syscall.WaitStatus)
	case <-time.After(10 * time.Second):
		p.Kill()
		<-done
		t.Fatal("bashcall did not end")
	}
	return 0
}

// TestSupervise runs commands through runCommand: exit status and output,
// the ladder on timeout and on abort, a second abort killing at once, the
// bounded drain of pipes that descendants hold, and an abort while
// draining, which kills at once and does not make the call aborted.
func TestSupervise(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip(err)
	}
	type want struct {
		out, err         string
		exit             int
		sig              syscall.Signal
		timedOut, abort  bool
		minTook, maxTook time.Duration
	}
	tests := []struct {
		name     string
		command  string
		timeout  time.Duration
		grace    time.Duration
		aborts   []time.Duration // when to send each abort request
		want     want
		outBytes int // instead of out and err: how many bytes each stream carries
	}{
		{name: "exit", command: "printf out; printf err >&2; exit 3", grace: time.Second,
			want: want{out: "out", err: "err", exit: 3, maxTook: 3 * time.Second}},
		{name: "signal", command: "echo before; kill -9 $$", grace: time.Second,
			want: want{out: "before\n", sig: syscall.SIGKILL, maxTook: 3 * time.Second}},
		{name: "large", command: "head -c 3000000 /dev/zero & head -c 3000000 /dev/zero >&2; wait", grace: time.Second,
			outBytes: 3000000, want: want{maxTook: 10 * time.Second}},
		{name: "timeout", command: "trap '' TERM; echo started; sleep 30", timeout: 300 * time.Millisecond, grace: 300 * time.Millisecond,
			want: want{out: "started\n", sig: syscall.SIGKILL, timedOut: true, minTook: 550 * time.Millisecond, maxTook: 5 * time.Second}},
		{name: "timeout_obeyed", command: "sleep 30", timeout: 300 * time.Millisecond, grace: 5 * time.Second,
			want: want{sig: syscall.SIGTERM, timedOut: true, minTook: 250 * time.Millisecond, maxTook: 3 * time.Second}},
		{name: "abort", command: "trap '' TERM; sleep 30", grace: 300 * time.Millisecond, aborts: []time.Duration{200 * time.Millisecond},
			want: want{sig: syscall.SIGKILL, abort: true, minTook: 450 * time.Millisecond, maxTook: 5 * time.Second}},
		{name: "abort_twice", command: "trap '' TERM; sleep 30", grace: 10 * time.Second, aborts: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond},
			want: want{sig: syscall.SIGKILL, abort: true, minTook: 350 * time.Millisecond, maxTook: 5 * time.Second}},
		{name: "held_pipe", command: "sleep 30 & echo started", grace: 400 * time.Millisecond,
			want: want{out: "started\n", minTook: 350 * time.Millisecond, maxTook: 5 * time.Second}},
		{name: "abort_while_draining", command: "sleep 30 & echo started", grace: 10 * time.Second, aborts: []time.Duration{300 * time.Millisecond},
			want: want{out: "started\n", minTook: 250 * time.Millisecond, maxTook: 5 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			abort := make(chan os.Signal, 2)
			for _, after := range tt.aborts {
				time.AfterFunc(after, func() { abort <- syscall.SIGTERM })
			}
			var stdout, stderr bytes.Buffer
			start := time.Now()
			res, err := runCommand(&runSpec{Argv: []string{bash, "-c", tt.command}, Dir: "/", Env: os.Environ(),
				Stdout: &stdout, Stderr: &stderr, Timeout: tt.timeout, Grace: tt.grace, Abort: abort})
			took := time.Since(start)
			if err != nil {
				t.Fatalf("runCommand: %v", err)
			}
			got := want{out: stdout.String(), err: stderr.String(), exit: res.ExitCode, sig: res.Signal,
				timedOut: res.TimedOut, abort: res.Aborted, minTook: tt.want.minTook, maxTook: tt.want.maxTook}
			if tt.outBytes > 0 {
				if stdout.Len() != tt.outBytes || stderr.Len() != tt.outBytes {
					t.Errorf("stdout %d bytes, stderr %d bytes, want %d each", stdout.Len(), stderr.Len(), tt.outBytes)
				}
				got.out, got.err = "", ""
			}
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); d != "" {
				t.Errorf("runCommand(%q) mismatch (-want +got):\n%s", tt.command, d)
			}
			if took < tt.want.minTook || took > tt.want.maxTook {
				t.Errorf("runCommand(%q) took %v, want %v to %v", tt.command, took, tt.want.minTook, tt.want.maxTook)
			}
		})
	}
}

// TestNoTerminal: stdin is /dev/null and there is no controlling terminal.
func TestNoTerminal(t *testing.T) {
	e := newTestEnv(t, "[sandbox]\nmode = \"danger-full-access\"\n")
	r := e.call(bashReq(`cat; exec 3</dev/tty && echo has-tty; echo "pgid=$(ps -o pgid= $$) sid=$(ps -o sid= $$) pid=$$"`, ""))
	text := r.text()
	if strings.Contains(text, "has-tty") {
		t.Errorf("the command has a terminal: %q", text)
	}
	var pgid, sid, pid int
	line := text[strings.Index(text, "pgid="):]
	fmt.Sscanf(strings.ReplaceAll(line, " ", ""), "pgid=%dsid=%dpid=%d", &pgid, &sid, &pid)
	if pgid != pid || sid != pid {
		t.Errorf("pgid %d, sid %d, pid %d: want the command to lead its own session", pgid, sid, pid)
	}
}

// TestEnvironment seeds secrets and checks the scrub, the [env] rules and
// bashcall's own variables.
func TestEnvironment(t *testing.T) {
	e := newTestEnv(t, `[env]
keep = ["KEEP_THIS_TOKEN"]
remove = ["DROP_*"]
set = { ADDED = "yes", TERM = "xterm" }
`)
	e.extraEnv = []string{"API_KEY=k1", "my_password=p", "GH_TOKEN=t", "AWS_SECRET_ACCESS_KEY=s",
		"KEEP_THIS_TOKEN=kept", "DROP_ME=x", "BASHCALL_STALE=1", "bashcall_lower=1", "PLAIN=plain"}
	r := e.call(sessionReq("bash", `{"command":"env | sort","description":"Show env"}`, "sess-1"))
	got := map[string]string{}
	for _, line := range strings.Split(r.text(), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	for _, k := range []string{"API_KEY", "my_password", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "DROP_ME", "BASHCALL_STALE", "bashcall_lower", "BASHCALL_TEST_MAIN"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s=%s reached the command", k, v)
		}
	}
	want := map[string]string{"PLAIN": "plain", "KEEP_THIS_TOKEN": "kept", "ADDED": "yes", "TERM": "xterm",
		"NO_COLOR": "1", "PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0",
		"BASHCALL_SHELL": "1", "BASHCALL_HOME": e.stateDir, "BASHCALL_SESSION_ID": "sess-1"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestWorkdir: absolute, relative to the session cwd, the session cwd, the
// config workspace; canonicalised; a bad one names the path.
func TestWorkdir(t *testing.T) {
	e := newTestEnv(t, "")
	sub := filepath.Join(e.workspace, "sub")
	os.Mkdir(sub, 0o755)
	link := filepath.Join(e.dir, "link")
	os.Symlink(e.workspace, link)
	session := `"session":{"id":"s","cwd":` + jsonString(link) + `}`
	tests := []struct{ name, req, want string }{
		{"session_cwd", `{"name":"bash","arguments":{"command":"pwd","description":"d"},` + session + `}`, e.workspace + "\n"},
		{"relative", `{"name":"bash","arguments":{"command":"pwd","description":"d","workdir":"sub"},` + session + `}`, sub + "\n"},
		{"absolute", `{"name":"bash","arguments":{"command":"pwd","description":"d","workdir":` + jsonString(sub) + `}}`, sub + "\n"},
		{"process_cwd", bashReq("pwd", ""), e.workspace + "\n"},
		{"missing", bashReq("pwd", `"workdir":"nope"`), `Error: bad workdir "` + e.workspace + `/nope": no such file or directory`},
		{"file", bashReq("pwd", `"workdir":"/etc/passwd"`), `Error: bad workdir "/etc/passwd": not a directory`},
		{"bad_session_cwd", `{"name":"bash","arguments":{"command":"pwd","description":"d"},"session":{"cwd":"/nonexistent-ws"}}`, `Error: bad session cwd "/nonexistent-ws": no such file or directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.call(tt.req).text(); got != tt.want {
				t.Errorf("text = %q, want %q", got, tt.want)
			}
		})
	}
	cfgWS := newTestEnv(t, "workspace = "+jsonString(sub)+"\n")
	if got := cfgWS.call(bashReq("pwd", "")).text(); got != sub+"\n" {
		t.Errorf("config workspace: text = %q, want %q", got, sub+"\n")
	}
}

// TestWorkdirNotEnterable: a workdir that bashcall's user cannot enter is
// a bad workdir that names it, unconfined and confined, not a start that
// fails with a bare "permission denied".
func TestWorkdirNotEnterable(t *testing.T) {
	for _, config := range []string{"[sandbox]\nmode = \"danger-full-access\"\n", ""} {
		e := newTestEnv(t, config).asNobody()
		closed := filepath.Join(e.dir, "closed")
		if err := os.Mkdir(closed, 0o700); err != nil { // root's
			t.Fatal(err)
		}
		want := `Error: bad workdir "` + closed + `": permission denied`
		if got := e.call(bashReq("pwd", `"workdir":`+jsonString(closed))).text(); got != want {
			t.Errorf("config %q: text = %q, want %q", config, got, want)
		}
	}
}

// TestLargeOutputMemory: a command printing far more than the limits keeps
// a bounded tail, a bounded spill and valid JSON.
func TestLargeOutputMemory(t *testing.T) {
	e := newTestEnv(t, "max_spill_bytes = 1048576\n")
	r := e.call(bashReq("head -c 50000000 /dev/urandom", ""))
	var got foregroundResult
	if err := json.Unmarshal(r.StructuredContent, &got); err != nil {
		t.Fatal(err)
	}
	if !got.Stdout.Truncated || got.Stdout.SpillPath != "" || !strings.HasSuffix(r.text(), markerTruncated(textUnavailable)) {
		t.Errorf("stdout = truncated %v spill %q; text ends %q", got.Stdout.Truncated, got.Stdout.SpillPath, r.text()[max(0, len(r.text())-60):])
	}
	if files, _ := filepath.Glob(filepath.Join(e.stateDir, "spill", "*")); len(files) != 0 {
		t.Errorf("spill files left past max_spill_bytes: %v", files)
	}
}

// TestOutputPeakRSS: a command printing 1 GB leaves bashcall's peak RSS
// within a few MiB of an empty call's.
func TestOutputPeakRSS(t *testing.T) {
	e := newTestEnv(t, "[sandbox]\nmode = \"danger-full-access\"\n")
	peak := func(command string) int64 {
		c := e.cmd()
		c.Stdin = strings.NewReader(bashReq(command, ""))
		if out, err := c.Output(); err != nil || !strings.Contains(string(out), `"isError":false`) {
			t.Fatalf("%q: %v %s", command, err, out)
		}
		return c.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB
	}
	empty := peak("true")
	big := peak("head -c 1000000000 /dev/zero")
	t.Logf("peak RSS: empty call %d KiB, 1 GB of output %d KiB", empty, big)
	if big-empty > 8<<10 {
		t.Errorf("1 GB of output grew the peak RSS by %d KiB; want under 8 MiB", big-empty)
	}
}

// TestStoppedCommandContinued: a command that stopped itself gets its
// SIGTERM when the call times out: the group is continued, so its trap
// runs and it ends before the SIGKILL, in the foreground and as a task
// that bash_kill stops.
func TestStoppedCommandContinued(t *testing.T) {
	e := newTestEnv(t, "grace_ms = 20000\n")
	const cmd = `trap 'echo trapped; exit 3' TERM; kill -STOP $$; sleep 100`
	start := time.Now()
	text := e.call(bashReq(cmd, `"timeoutMs":300`)).text()
	if took := time.Since(start); text != "trapped\n[timed out after 300ms]\n[exit code: 3]" || took > 10*time.Second {
		t.Errorf("foreground: %q after %v", text, took)
	}
	e.call(startReq(cmd, "S"))
	time.Sleep(300 * time.Millisecond)
	start = time.Now()
	e.call(killReq("bash-1", "S"))
	if took, text := time.Since(start), e.call(outputReq("bash-1", "S", "")).text(); !strings.Contains(text, "trapped") || took > 10*time.Second {
		t.Errorf("task: %q, bash_kill took %v", text, took)
	}
}
