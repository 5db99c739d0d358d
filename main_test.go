package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// testBase is a directory outside /tmp for state dirs and workspaces: in
// workspace-write mode /tmp is writable, and a state dir inside it would
// (rightly) be refused.
var testBase string

// TestMain runs bashcall itself when the test binary is re-executed as
// bashcall (BASHCALL_TEST_MAIN=1), as its launcher or as a supervisor, so
// that end-to-end tests run the real program without a separate build.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == launcherArg || os.Args[1] == supervisorArg) || os.Getenv("BASHCALL_TEST_MAIN") == "1" {
		main()
		return
	}
	flag.Parse()
	relocate()
	parent := "/var/tmp"
	if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
		parent, _ = os.UserCacheDir()
	}
	var err error
	if testBase, err = os.MkdirTemp(parent, "bashcall-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(testBase, 0o711) // tests that run bashcall as another user
	// The default state dir, where serve lists its spool dir too, is the
	// run's own, never the user's.
	os.Setenv("XDG_STATE_HOME", filepath.Join(testBase, "xdg-state"))

	code := m.Run()
	os.RemoveAll(testBase)
	// Only the relocated process itself (exec keeps its pid) removes the
	// copy: test binaries it re-executes inherit the variables.
	if dir := os.Getenv("BASHCALL_TEST_COPY"); dir != "" && strings.HasPrefix(filepath.Base(dir), "bashcall-test-bin-") &&
		os.Getenv("BASHCALL_TEST_COPY_OWNER") == fmt.Sprint(os.Getpid()) {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// relocate re-executes the test binary from a copy outside /tmp when it
// was built there (go test's default): the bashcall executable is a control
// path that no writable directory may contain, and /tmp is writable in
// workspace-write mode. The copy is removed when the tests end.
func relocate() {
	exe, err := os.Executable()
	if err != nil || os.Getenv("BASHCALL_TEST_COPY") != "" {
		return
	}
	exe, _ = filepath.EvalSymlinks(exe)
	if !within(exe, canonicalOr(os.TempDir())) && !within(exe, canonicalOr("/tmp")) {
		return
	}
	dir, err := os.MkdirTemp("/var/tmp", "bashcall-test-bin-")
	if err != nil {
		return
	}
	os.Chmod(dir, 0o755) // tests that run bashcall as another user
	dst := filepath.Join(dir, filepath.Base(exe))
	if b, err := os.ReadFile(exe); err != nil || os.WriteFile(dst, b, 0o755) != nil {
		os.RemoveAll(dir)
		return
	}
	// The copy removes its directory when it is done (TestMain).
	env := append(os.Environ(), "BASHCALL_TEST_COPY="+dir, fmt.Sprintf("BASHCALL_TEST_COPY_OWNER=%d", os.Getpid()))
	err = syscall.Exec(dst, append([]string{dst}, os.Args[1:]...), env)
	os.RemoveAll(dir)
	fmt.Fprintln(os.Stderr, "relocating the test binary:", err)
}

// testEnv is one isolated bashcall setup: config, state dir, workspace.
type testEnv struct {
	t         *testing.T
	dir       string
	config    string
	stateDir  string
	workspace string
	extraEnv  []string
	// nobody runs bashcall as an unprivileged user (see asNobody).
	nobody bool
	// hangAfter is how long run waits before calling a run hung
	// (default a minute).
	hangAfter time.Duration
}

// newTestEnv writes config (TOML) and makes a state dir and a workspace.
// Unless config names a sandbox mode, the env runs danger-full-access, so
// that a test which is not about the sandbox runs on every kernel. A test
// that is says so with newSandboxingEnv or newConfinedEnv.
func newTestEnv(t *testing.T, config string) *testEnv {
	t.Helper()
	return makeTestEnv(t, unconfined(t, config))
}

// newSandboxingEnv is newTestEnv with the contract's default sandbox mode
// (workspace-write unless config names another): for a test of what a
// sandboxing configuration offers, refuses or escalates to before any
// command runs confined. It runs on every kernel, so nothing it checks may
// need Landlock: where that fails closed, the test belongs to
// newConfinedEnv.
func newSandboxingEnv(t *testing.T, config string) *testEnv {
	t.Helper()
	return makeTestEnv(t, config)
}

// newConfinedEnv is newSandboxingEnv for a test whose commands really run
// confined: its assertions or goldens depend on what Landlock does. It is
// skipped, saying so, where the kernel has no Landlock.
func newConfinedEnv(t *testing.T, config string) *testEnv {
	t.Helper()
	requireABI(t, 1)
	return makeTestEnv(t, config)
}

// requireABI skips a test the kernel cannot run, saying why.
func requireABI(t testing.TB, want int) int {
	t.Helper()
	sup := sandboxSupport(os.Getenv) // BASHCALL_DISABLE_LANDLOCK=1 too
	abi, err := sup.ABI, sup.ABIErr
	if err != nil || abi < want {
		t.Skipf("needs Landlock: the test checks confined runs, which need Landlock ABI >= %d; this kernel offers V%d (%v)", want, abi, err)
	}
	return abi
}

// unconfined adds mode = "danger-full-access" to config unless it names a
// mode already: inside its [sandbox] table when it has one, else in a new
// table at the end (where it cannot capture top-level keys). A config
// that does not parse is left alone: the test is about it.
func unconfined(t *testing.T, config string) string {
	t.Helper()
	var c struct {
		Sandbox map[string]any `toml:"sandbox"`
	}
	if _, err := toml.Decode(config, &c); err != nil {
		return config
	}
	if _, ok := c.Sandbox["mode"]; ok {
		return config
	}
	lines := strings.SplitAfter(config, "\n")
	out := ""
	for i, l := range lines {
		if strings.TrimSpace(l) == "[sandbox]" {
			out = strings.Join(lines[:i+1], "") + "mode = \"danger-full-access\"\n" + strings.Join(lines[i+1:], "")
			break
		}
	}
	if out == "" {
		out = config
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += "[sandbox]\nmode = \"danger-full-access\"\n"
	}
	var check struct {
		Sandbox struct{ Mode string } `toml:"sandbox"`
	}
	if _, err := toml.Decode(out, &check); err != nil || check.Sandbox.Mode != modeFullAccess {
		t.Fatalf("cannot make this config run danger-full-access (%v); name the mode in it:\n%s", err, config)
	}
	return out
}

// makeTestEnv writes config as it is.
func makeTestEnv(t *testing.T, config string) *testEnv {
	t.Helper()
	dir, err := os.MkdirTemp(testBase, strings.ReplaceAll(t.Name(), "/", "_")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dir, _ = filepath.EvalSymlinks(dir)
	e := &testEnv{t: t, dir: dir, config: filepath.Join(dir, "config.toml"),
		stateDir: filepath.Join(dir, "state"), workspace: filepath.Join(dir, "ws")}
	if err := os.Mkdir(e.workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.stopTasks)
	return e
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// cmd prepares bashcall with the env's config and state dir.
func (e *testEnv) cmd(args ...string) *exec.Cmd {
	c := exec.Command(os.Args[0], append([]string{"-config", e.config, "-state-dir", e.stateDir}, args...)...)
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		// A subcommand takes the common flags after its name.
		c.Args = append([]string{os.Args[0], args[0], "-config", e.config, "-state-dir", e.stateDir}, args[1:]...)
	}
	c.Dir = e.workspace
	c.Env = append(os.Environ(), "BASHCALL_TEST_MAIN=1", "XDG_CACHE_HOME="+filepath.Join(testBase, "cache"))
	c.Env = append(c.Env, e.extraEnv...)
	if e.nobody {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID}}
		c.Env = append(c.Env, "HOME="+e.dir, "XDG_CACHE_HOME="+filepath.Join(e.dir, "cache"), "XDG_STATE_HOME="+filepath.Join(e.dir, "xdg-state"))
	}
	return c
}

// nobodyID is the unprivileged user the tests run bashcall as.
const nobodyID = 65534

// asNobody makes the env's files belong to an unprivileged user and runs
// bashcall as that user from now on. It needs root; without it the test
// is skipped, since only root can switch users.
func (e *testEnv) asNobody() *testEnv {
	e.t.Helper()
	if os.Geteuid() != 0 {
		e.t.Skip("running bashcall as another user needs root")
	}
	filepath.Walk(e.dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, nobodyID, nobodyID)
		}
		return nil
	})
	e.nobody = true
	return e
}

// run runs bashcall with stdin and waits, failing the test after a minute.
func (e *testEnv) run(stdin string, args ...string) result {
	e.t.Helper()
	c := e.cmd(args...)
	c.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(max(e.hangAfter, time.Minute)):
		c.Process.Kill()
		<-done
		e.t.Fatalf("bashcall %q hung on %s", args, stdin)
	}
	return result{out.String(), errb.String(), c.ProcessState.ExitCode()}
}

// call runs one request and decodes the response.
func (e *testEnv) call(req string) wireResponse {
	e.t.Helper()
	r := e.run(req)
	if r.code != 0 {
		e.t.Fatalf("bashcall exit %d on %s\nstdout: %s\nstderr: %s", r.code, req, r.stdout, r.stderr)
	}
	return decodeResponse(e.t, r.stdout)
}

// wireResponse is a response as a host decodes it.
type wireResponse struct {
	ID                json.RawMessage   `json:"id"`
	Name              string            `json:"name"`
	IsError           bool              `json:"isError"`
	Content           []textContent     `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent"`
	Present           json.RawMessage   `json:"present"`
	Notices           []string          `json:"notices"`
	ApprovalRequired  *approvalRequired `json:"approvalRequired"`
}

func (w wireResponse) text() string {
	if len(w.Content) != 1 {
		return fmt.Sprintf("<%d content blocks>", len(w.Content))
	}
	return w.Content[0].Text
}

func decodeResponse(t *testing.T, line string) wireResponse {
	t.Helper()
	if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
		t.Fatalf("response is not one line: %q", line)
	}
	var w wireResponse
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("response %q: %v", line, err)
	}
	return w
}

// bashReq builds a bash request; extra holds more arguments as JSON.
func bashReq(command string, extra string) string {
	args := `{"command":` + jsonString(command) + `,"description":"Run a test command"`
	if extra != "" {
		args += "," + extra
	}
	return `{"name":"bash","arguments":` + args + `}}`
}

// sessionReq adds a session to a request built from tool and arguments.
func sessionReq(tool, args, session string) string {
	s := `{"name":` + jsonString(tool) + `,"arguments":` + args
	if session != "" {
		s += `,"session":{"id":` + jsonString(session) + `}`
	}
	return s + "}"
}

// stopTasks kills every supervisor and command the env's tasks left.
func (e *testEnv) stopTasks() {
	dirs, _ := filepath.Glob(filepath.Join(e.stateDir, "tasks", "bash-*"))
	for _, d := range dirs {
		var sup procRecord
		if readJSON(filepath.Join(d, "supervisor.json"), &sup) == nil && sup.alive() {
			signalProcess(sup.PID, sup.Start, syscall.SIGKILL)
		}
		var cmd treeRecord
		if readJSON(filepath.Join(d, "command.json"), &cmd) == nil {
			cmd.stop()
		}
	}
}

// placeholders keep goldens free of temporary paths.
func (e *testEnv) scrub(s string) string {
	s = strings.ReplaceAll(s, e.stateDir, "$STATE")
	s = strings.ReplaceAll(s, e.workspace, "$WORKSPACE")
	return randomName.ReplaceAllString(s, "$$RANDOM-")
}

var randomName = regexp.MustCompile(`[0-9a-f]{16}-`)

// golden compares got with testdata/<test>/<name>.golden; -update writes it.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", strings.Split(t.Name(), "/")[0], name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading golden (run go test -update to create it): %v", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", p, d)
	}
}

// waitFor polls cond for up to d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// pidAlive reports whether a process still runs (a zombie does not).
func pidAlive(pid int) bool {
	s, err := readProcStat(pid)
	return err == nil && !s.zombie
}

// readPIDs reads whitespace-separated pids from a file the command wrote.
func readPIDs(t *testing.T, p string) []int {
	t.Helper()
	var pids []int
	waitFor(t, 10*time.Second, "pid file "+p, func() bool {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		pids = nil
		for _, f := range strings.Fields(string(b)) {
			var n int
			fmt.Sscan(f, &n)
			pids = append(pids, n)
		}
		return true
	})
	return pids
}
