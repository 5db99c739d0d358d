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

// TestLandlockConstants pins the local Landlock constants to x/sys.
func TestLandlockConstants(t *testing.T) {
	pins := []struct {
		name      string
		got, want uint64
	}{
		{"EXECUTE", uint64(accessExecute), unix.LANDLOCK_ACCESS_FS_EXECUTE},
		{"WRITE_FILE", uint64(accessWriteFile), unix.LANDLOCK_ACCESS_FS_WRITE_FILE},
		{"READ_FILE", uint64(accessReadFile), unix.LANDLOCK_ACCESS_FS_READ_FILE},
		{"READ_DIR", uint64(accessReadDir), unix.LANDLOCK_ACCESS_FS_READ_DIR},
		{"REMOVE_DIR", uint64(accessRemoveDir), unix.LANDLOCK_ACCESS_FS_REMOVE_DIR},
		{"REMOVE_FILE", uint64(accessRemoveFile), unix.LANDLOCK_ACCESS_FS_REMOVE_FILE},
		{"MAKE_CHAR", uint64(accessMakeChar), unix.LANDLOCK_ACCESS_FS_MAKE_CHAR},
		{"MAKE_DIR", uint64(accessMakeDir), unix.LANDLOCK_ACCESS_FS_MAKE_DIR},
		{"MAKE_REG", uint64(accessMakeReg), unix.LANDLOCK_ACCESS_FS_MAKE_REG},
		{"MAKE_SOCK", uint64(accessMakeSock), unix.LANDLOCK_ACCESS_FS_MAKE_SOCK},
		{"MAKE_FIFO", uint64(accessMakeFifo), unix.LANDLOCK_ACCESS_FS_MAKE_FIFO},
		{"MAKE_BLOCK", uint64(accessMakeBlock), unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK},
		{"MAKE_SYM", uint64(accessMakeSym), unix.LANDLOCK_ACCESS_FS_MAKE_SYM},
		{"REFER", uint64(accessRefer), unix.LANDLOCK_ACCESS_FS_REFER},
		{"TRUNCATE", uint64(accessTruncate), unix.LANDLOCK_ACCESS_FS_TRUNCATE},
		{"IOCTL_DEV", uint64(accessIoctlDev), unix.LANDLOCK_ACCESS_FS_IOCTL_DEV},
		{"SCOPE_ABSTRACT_UNIX_SOCKET", scopeAbstractUnixSocket, unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET},
		{"SCOPE_SIGNAL", scopeSignal, unix.LANDLOCK_SCOPE_SIGNAL},
	}
	for _, p := range pins {
		if p.got != p.want {
			t.Errorf("%s = %#x, want %#x (x/sys)", p.name, p.got, p.want)
		}
	}
}

// TestLandlockErrataProbe: the errata mask the kernel reports reaches the
// support report.
func TestLandlockErrataProbe(t *testing.T) {
	requireABI(t, 1)
	mask, err := landlockCreateRuleset(nil, 0, unix.LANDLOCK_CREATE_RULESET_ERRATA)
	if errors.Is(err, unix.EINVAL) {
		t.Skip("the kernel predates LANDLOCK_CREATE_RULESET_ERRATA")
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := sandboxSupport(os.Getenv).Errata; got != uint64(mask) {
		t.Errorf("sandboxSupport(os.Getenv).Errata = %#b, want the kernel's %#b", got, mask)
	}
	t.Logf("errata fixed: %#b; missing: %v", mask, missingErrata(sandboxSupport(os.Getenv).ABI, uint64(mask)))
}

// sandboxCase runs a command in the workspace and checks its outcome.
type sandboxCase struct {
	name    string
	command string
	ok      bool   // exit 0 expected
	denied  bool   // the denial marker expected
	absent  string // a path that must not exist afterwards
	intact  string // a file that must still hold "outside\n"
}

func runSandboxCases(t *testing.T, e *testEnv, cases []sandboxCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call(bashReq(c.command, ""))
			text := r.text()
			var res foregroundResult
			decodeStructured(t, r, &res)
			if res.Sandbox == nil {
				t.Fatalf("%q: no sandbox facts: %s", c.command, r.StructuredContent)
			}
			exited0 := res.Signal == nil && res.ExitCode != nil && *res.ExitCode == 0
			if exited0 != c.ok {
				t.Errorf("%q: exit 0 = %v, want %v; text %q", c.command, exited0, c.ok, text)
			}
			if hasMarker := strings.Contains(text, markerDenied(res.Sandbox.Mode)); hasMarker != c.denied {
				t.Errorf("%q: denial marker = %v, want %v; text %q", c.command, hasMarker, c.denied, text)
			}
			if c.absent != "" {
				if _, err := os.Lstat(c.absent); err == nil {
					t.Errorf("%q: %s exists", c.command, c.absent)
				}
			}
			if c.intact != "" {
				if b, err := os.ReadFile(c.intact); err != nil || string(b) != "outside\n" {
					t.Errorf("%q: %s = %q, %v; want it intact", c.command, c.intact, b, err)
				}
			}
		})
	}
}

// TestSandboxReadOnly: only /dev/null (and /dev/tty) can be written.
func TestSandboxReadOnly(t *testing.T) {
	e := newConfinedEnv(t, "[sandbox]\nmode = \"read-only\"\n")
	runSandboxCases(t, e, []sandboxCase{
		{name: "write_workspace", command: "echo x > made.txt", denied: true, absent: filepath.Join(e.workspace, "made.txt")},
		{name: "mkdir_workspace", command: "mkdir made", denied: true, absent: filepath.Join(e.workspace, "made")},
		{name: "dev_null", command: "echo x > /dev/null && cat /etc/hostname >/dev/null", ok: true},
		{name: "dev_shm", command: "echo x > /dev/shm/bashcall-ro-test", denied: true, absent: "/dev/shm/bashcall-ro-test"},
		{name: "tmp", command: "echo x > /tmp/bashcall-ro-test-$$", denied: true},
		{name: "read_and_exec", command: "ls /etc >/dev/null && cat /etc/passwd >/dev/null", ok: true},
		// "/" holds the state dir, which reads withhold: its entries can be
		// read and listed, "/" itself cannot be listed (README, "Reads").
		{name: "split_dir", command: "ls / >/dev/null", denied: true},
	})
}

// TestSandboxWorkspaceWrite: the workspace and /tmp are writable, nothing
// else, and the classic escapes all fail.
func TestSandboxWorkspaceWrite(t *testing.T) {
	e := newConfinedEnv(t, "")
	sibling := filepath.Join(e.dir, "sibling")
	os.Mkdir(sibling, 0o755)
	outside := filepath.Join(sibling, "file")
	reset := func() {
		if err := os.WriteFile(outside, []byte("outside\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reset()
	q := func(s string) string { return "'" + s + "'" }
	cases := []sandboxCase{
		{name: "inside", command: "echo x > made.txt && mkdir -p d/e && mv made.txt d/ && rm -r d", ok: true},
		{name: "sibling", command: "echo x > " + q(filepath.Join(sibling, "new")), denied: true, absent: filepath.Join(sibling, "new")},
		{name: "tmp", command: "f=$(mktemp) && echo x > $f && rm $f", ok: true},
		{name: "symlink_out", command: "ln -s " + q(outside) + " link && echo pwned > link", denied: true, intact: outside},
		{name: "hard_link", command: "ln " + q(outside) + " hard && echo pwned >> hard", intact: outside, absent: filepath.Join(e.workspace, "hard")},
		// Where the workspace is a mount of its own, mv falls back to a
		// copy (reading is allowed) and its unlink of the original fails.
		{name: "mv_in", command: "mv " + q(outside) + " stolen", denied: true, intact: outside},
		{name: "truncate", command: "truncate -s 0 " + q(outside), denied: true, intact: outside},
		{name: "colon_redirect", command: ": > " + q(outside), denied: true, intact: outside},
		{name: "rm", command: "rm -f " + q(outside), denied: true, intact: outside},
		{name: "state_dir", command: "echo x > \"$BASHCALL_HOME/planted\"", denied: true, absent: filepath.Join(e.stateDir, "planted")},
		{name: "state_dir_tasks", command: "mkdir -p \"$BASHCALL_HOME/tasks/bash-99\"", denied: true, absent: filepath.Join(e.stateDir, "tasks", "bash-99")},
		{name: "config_file", command: "echo 'mode=1' >> " + q(e.config), denied: true},
	}
	for _, c := range cases {
		reset()
		runSandboxCases(t, e, []sandboxCase{c})
	}
	os.Remove(filepath.Join(e.workspace, "link"))
}

// TestSandboxSignalScope: a sandboxed command cannot signal a process
// outside its sandbox, its parent (bashcall) included.
func TestSandboxSignalScope(t *testing.T) {
	requireABI(t, 6)
	e := newConfinedEnv(t, "")
	outside := exec.Command("sleep", "60")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer outside.Process.Kill()
	r := e.call(bashReq(fmt.Sprintf("kill -TERM %d; echo outside=$?; kill -TERM $PPID; echo parent=$?; sleep 0.2; kill -0 $$ && echo self-ok", outside.Process.Pid), ""))
	if !strings.Contains(r.text(), "outside=1") || !strings.Contains(r.text(), "parent=1") || !strings.Contains(r.text(), "self-ok") {
		t.Errorf("text = %q", r.text())
	}
	var got foregroundResult
	json.Unmarshal(r.StructuredContent, &got)
	if got.Sandbox == nil || !got.Sandbox.Scoped {
		t.Errorf("sandbox facts = %+v, want scoped", got.Sandbox)
	}
	if err := outside.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the outside process was killed: %v", err)
	}
}

// TestSandboxUnavailable: without Landlock a confined mode fails closed,
// danger-full-access still runs. It runs on every kernel.
func TestSandboxUnavailable(t *testing.T) {
	e := newSandboxingEnv(t, "")
	e.extraEnv = []string{"BASHCALL_DISABLE_LANDLOCK=1"}
	r := e.call(bashReq("echo ran > ran.txt", ""))
	golden(t, "foreground", r.text())
	if _, err := os.Stat(filepath.Join(e.workspace, "ran.txt")); err == nil {
		t.Error("the command ran unconfined")
	}
	r = e.call(bashReq("echo ran", `"run_in_background":true`))
	golden(t, "background", r.text())
	full := newTestEnv(t, "[sandbox]\nmode = \"danger-full-access\"\n")
	full.extraEnv = e.extraEnv
	if r := full.call(bashReq("echo ran", "")); r.text() != "ran\n" {
		t.Errorf("danger-full-access: %q", r.text())
	}
	v := e.run("", "version")
	if !strings.Contains(v.stdout, "landlock: unavailable") || !strings.Contains(v.stdout, "refused (fail closed)") {
		t.Errorf("version = %q", v.stdout)
	}
}

// TestRunnerFailure: a launcher failure is reported out of band: the
// foreground error names it, a background task settles with runnerFailed.
func TestRunnerFailure(t *testing.T) {
	dir := newTestEnv(t, "").dir
	loop := filepath.Join(dir, "loop")
	os.Symlink(loop, loop) // opening it fails with ELOOP inside the launcher
	e := newConfinedEnv(t, "[sandbox]\nwritable_roots = ["+jsonString(loop)+"]\n")
	r := e.call(bashReq("echo ran > ran.txt", ""))
	golden(t, "foreground", e.scrub(strings.ReplaceAll(r.text(), loop, "$LOOP")))
	if _, err := os.Stat(filepath.Join(e.workspace, "ran.txt")); err == nil {
		t.Error("the command ran")
	}
	r = e.call(sessionReq("bash", `{"command":"echo ran","description":"d","run_in_background":true}`, "A"))
	if r.text() != textStarted("bash-1") {
		t.Fatalf("start: %q", r.text())
	}
	out := e.call(sessionReq("bash_output", `{"task_id":"bash-1","wait":true}`, "A"))
	golden(t, "background", strings.ReplaceAll(out.text(), loop, "$LOOP"))
	var got taskOutputResult
	json.Unmarshal(out.StructuredContent, &got)
	if got.Sandbox == nil || !got.Sandbox.RunnerFailed || got.Status != stateKilled {
		t.Errorf("structured = %+v", got)
	}
	again := e.call(sessionReq("bash_output", `{"task_id":"bash-1"}`, "A"))
	if !strings.Contains(again.text(), markerRunnerFailed(modeWorkspaceWrite)) {
		t.Errorf("the runner marker is not repeated: %q", again.text())
	}
}

// TestProtectedStateDir: a workspace that contains the state dir is
// refused in workspace-write, never run with the state dir writable.
func TestProtectedStateDir(t *testing.T) {
	e := newConfinedEnv(t, "")
	r := e.run(`{"name":"bash","arguments":{"command":"echo x > \"$BASHCALL_HOME/x\"","description":"d"},"session":{"cwd":` + jsonString(e.dir) + `}}`)
	w := decodeResponse(t, r.stdout)
	if !w.IsError || !strings.Contains(w.text(), "must not be able to change") {
		t.Errorf("text = %q", w.text())
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, "x")); err == nil {
		t.Error("the command wrote into the state dir")
	}
}

// TestSandboxedBackground: a background task is confined the same way,
// and its denial is reported on every read after it settles.
func TestSandboxedBackground(t *testing.T) {
	e := newConfinedEnv(t, "[sandbox]\nmode = \"read-only\"\n")
	e.call(sessionReq("bash", `{"command":"echo x > f","description":"d","run_in_background":true}`, "A"))
	r := e.call(sessionReq("bash_output", `{"task_id":"bash-1","wait":true}`, "A"))
	golden(t, "first_read", r.text())
	r = e.call(sessionReq("bash_output", `{"task_id":"bash-1"}`, "A"))
	golden(t, "second_read", r.text())
	if _, err := os.Stat(filepath.Join(e.workspace, "f")); err == nil {
		t.Error("the background command wrote in read-only mode")
	}
}

// TestRealWork: in workspace-write with the default config, go build,
// go test and git work in the workspace, while the user's real caches
// stay out of reach.
func TestRealWork(t *testing.T) {
	e := newConfinedEnv(t, "")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go is not on PATH")
	}
	e.hangAfter = 5 * time.Minute // a first build compiles the standard library: slow on a loaded machine
	os.WriteFile(filepath.Join(e.workspace, "go.mod"), []byte("module example.com/w\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(e.workspace, "w.go"), []byte("package main\n\nfunc add(a, b int) int { return a + b }\n\nfunc main() { println(add(1, 2)) }\n"), 0o644)
	os.WriteFile(filepath.Join(e.workspace, "w_test.go"), []byte("package main\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif add(1, 2) != 3 {\n\t\tt.Fatal(\"add\")\n\t}\n}\n"), 0o644)
	realCache, _ := exec.Command(goBin, "env", "GOCACHE").Output()
	cmd := fmt.Sprintf(`set -e
export PATH=%s:$PATH GOFLAGS=-mod=mod GOTOOLCHAIN=local
go build -o w . && ./w
go test ./...
git init -q && git add -A && git -c user.name=t -c user.email=t@example.com commit -qm first && git log --oneline | wc -l
touch %q/bashcall-probe 2>/dev/null && echo REAL-CACHE-WRITABLE || echo real-cache-protected
touch "$HOME/bashcall-probe" 2>/dev/null && echo HOME-WRITABLE || echo home-protected`, filepath.Dir(goBin), strings.TrimSpace(string(realCache)))
	r := e.call(bashReq(cmd, `"timeoutMs":300000`))
	text := r.text()
	for _, want := range []string{"3\n", "ok  \texample.com/w", "\n1\n", "real-cache-protected", "home-protected"} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	var res foregroundResult
	decodeStructured(t, r, &res)
	if res.ExitCode == nil || *res.ExitCode != 0 || res.Signal != nil {
		t.Errorf("failed:\n%s", text)
	}
}

// TestLauncherRefusesSymlinks: the launcher gets canonical paths, so a
// symlink found in one at launch time (swapped in after bashcall checked
// it) fails the launcher instead of widening the sandbox.
func TestLauncherRefusesSymlinks(t *testing.T) {
	requireABI(t, 1)
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.Mkdir(target, 0o700)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	var out, errOut strings.Builder
	res, err := runCommand(&runSpec{
		Argv: []string{selfExe(), launcherArg, "-w", link, "--", "/bin/sh", "-c", "touch " + filepath.Join(target, "x")},
		Dir:  dir, Stdout: &out, Stderr: &errOut, Grace: time.Second, Launcher: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.RunnerFailure, "too many levels of symbolic links") {
		t.Errorf("runner failure = %q, want ELOOP", res.RunnerFailure)
	}
	if _, err := os.Stat(filepath.Join(target, "x")); err == nil {
		t.Error("the command ran with the symlink's target writable")
	}
}

// TestLauncherOwnNamespace: a launcher told to arrange mounts but started
// in bashcall's own mount namespace refuses, and changes no mount of the
// host's.
func TestLauncherOwnNamespace(t *testing.T) {
	requireABI(t, 1)
	before, _ := os.ReadFile("/proc/self/mountinfo")
	var out, errOut strings.Builder
	res, err := runCommand(&runSpec{
		Argv: []string{selfExe(), launcherArg, "-ns", mountNSID(), "-w", "/dev/null", "--", "/bin/true"},
		Dir:  "/", Env: os.Environ(), Stdout: &out, Stderr: &errOut, Grace: time.Second, Launcher: true,
	})
	if err != nil || !strings.Contains(res.RunnerFailure, "not in a mount namespace of its own") {
		t.Errorf("runCommand: %+v, %v", res, err)
	}
	if after, _ := os.ReadFile("/proc/self/mountinfo"); string(after) != string(before) {
		t.Errorf("the host's mounts changed:\n%s\nwas:\n%s", after, before)
	}
}

// TestFailureKind: a launcher's failure is confinement's ('S', the
// runner failure), but for one where the host ran short of descriptors,
// memory or processes, or the command's directory could not be entered,
// which is the command not starting ('E'), whatever the text says; and
// the status pipe's two kinds read as such.
func TestFailureKind(t *testing.T) {
	for _, tt := range []struct {
		err  error
		kind byte
	}{
		{fmt.Errorf("opening rule path %q: %w", "/x", unix.ELOOP), 'S'},
		{fmt.Errorf("landlock_restrict_self: %w", unix.EPERM), 'S'},
		{fmt.Errorf("opening rule path %q: %w", "/x: too many open files", unix.ENOENT), 'S'},
		{fmt.Errorf("opening rule path %q: %w", "/.dockerenv", unix.EMFILE), 'E'},
		{fmt.Errorf("landlock_create_ruleset: %w", unix.ENFILE), 'E'},
		{fmt.Errorf("mount_setattr: %w", unix.ENOMEM), 'E'},
		{fmt.Errorf("fork: %w", unix.EAGAIN), 'E'},
		{&startFailure{fmt.Errorf("chdir %q: %w", "/w", unix.EACCES)}, 'E'},
	} {
		if got := failureKind(tt.err); got != tt.kind {
			t.Errorf("failureKind(%v) = %c, want %c", tt.err, got, tt.kind)
		}
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.Write(failure(tt.err))
		w.Close()
		st := readLauncherStatus(r)
		r.Close()
		if runner := st.failure != ""; runner != (tt.kind == 'S') || (st.execErr != nil) == runner {
			t.Errorf("%v: read as failure %q, exec error %v", tt.err, st.failure, st.execErr)
		}
	}
}
