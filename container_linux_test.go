package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A bashcall started with BASHCALL_TEST_UNMOUNT_PROC=1 in a private mount
// namespace first unmounts /proc, as a bare chroot or container lacks it.
func init() {
	if os.Getenv("BASHCALL_TEST_UNMOUNT_PROC") == "1" {
		if err := unix.Unmount("/proc", unix.MNT_DETACH); err != nil {
			fmt.Fprintln(os.Stderr, "unmounting /proc:", err)
			os.Exit(125)
		}
		// A /proc mounted over another (unshare --mount-proc) uncovers it.
		for unix.Unmount("/proc", unix.MNT_DETACH) == nil {
		}
	}
}

// runNoProc runs bashcall in a mount namespace of its own without /proc.
func (e *testEnv) runNoProc(stdin string, args ...string) result {
	e.t.Helper()
	c := e.cmd(args...)
	c.Env = append(c.Env, "BASHCALL_TEST_UNMOUNT_PROC=1")
	c.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	c.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	c.Run()
	if c.ProcessState == nil || c.ProcessState.ExitCode() == 125 {
		e.t.Fatalf("bashcall without /proc: %v\n%s", c.ProcessState, errb.String())
	}
	return result{out.String(), errb.String(), c.ProcessState.ExitCode()}
}

const noProcReason = "cannot re-execute bashcall through /proc/self/exe: no such file or directory; mount /proc"

// TestNoProc: without /proc, a confined call and a background start are
// errors that name /proc/self/exe and the fix; the failed task shows the
// reason to a later read; version and doctor say it; an unconfined
// foreground call still runs.
func TestNoProc(t *testing.T) {
	requireABI(t, 1)
	if os.Geteuid() != 0 {
		t.Skip("unmounting /proc in a private mount namespace needs root")
	}
	e := newConfinedEnv(t, "")
	fg := decodeResponse(t, e.runNoProc(bashReq("echo hi", "")).stdout)
	golden(t, "foreground", fg.text())
	if !fg.IsError || !strings.Contains(fg.text(), noProcReason) {
		t.Errorf("confined call: %q", fg.text())
	}
	bg := decodeResponse(t, e.runNoProc(startReq("echo hi", "A")).stdout)
	golden(t, "background", bg.text())
	if !bg.IsError || bg.text() != "Error: cannot start the background task: "+noProcReason || bg.StructuredContent != nil {
		t.Errorf("background start: %q, structured %s", bg.text(), bg.StructuredContent)
	}
	out := e.call(outputReq("bash-1", "A", ""))
	if !strings.Contains(out.text(), noProcReason) || !strings.HasSuffix(out.text(), statusLine(taskStatus{State: stateKilled})) {
		t.Errorf("a later read of the task: %q", out.text())
	}
	if r := e.call(sessionReq("bash_list", "{}", "A")); len(r.Notices) != 0 {
		t.Errorf("the failed start left a notice: %q", r.Notices)
	}
	if v := e.runNoProc("", "version"); v.code != 0 || !strings.Contains(v.stdout, "re-execution: cannot re-execute bashcall through /proc/self/exe") {
		t.Errorf("version: exit %d, %q", v.code, v.stdout)
	}
	d := e.runNoProc("", "doctor")
	if d.code != 1 || !strings.Contains(d.stdout, "missing  /proc: cannot re-execute bashcall through /proc/self/exe") || !strings.Contains(d.stderr, "missing /proc") {
		t.Errorf("doctor: exit %d, stdout %q, stderr %q", d.code, d.stdout, d.stderr)
	}
	full := newTestEnv(t, "[sandbox]\nmode = \"danger-full-access\"\n")
	if r := decodeResponse(t, full.runNoProc(bashReq("echo hi", "")).stdout); r.IsError || r.text() != "hi\n" {
		t.Errorf("unconfined call without /proc: %q", r.text())
	}
}

// container is a minimal root tree like the Dockerfile's: the static
// bashcall (this test binary), bash-static as /bin/bash, /tmp, and
// /dev/null and /proc when asked for.
type container struct {
	t    *testing.T
	root string
}

// newContainer builds the tree, skipping without root, unshare, chroot
// or a static bash.
func newContainer(t *testing.T, devNull bool) *container {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chroot and new namespaces need root")
	}
	for _, tool := range []string{"unshare", "chroot"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	bash := "/bin/bash-static"
	if _, err := os.Stat(bash); err != nil {
		t.Skipf("no static bash (apt-get install bash-static): %v", err)
	}
	bin := staticBashcall(t)
	c := &container{t: t, root: filepath.Join(newTestEnv(t, "").dir, "root")}
	for _, d := range []string{"bin", "tmp", "dev", "proc", "root", "work"} {
		if err := os.MkdirAll(filepath.Join(c.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(c.root, "tmp"), 0o1777)
	os.Chmod(filepath.Join(c.root, "root"), 0o700)
	for from, to := range map[string]string{bin: "bashcall", bash: "bash"} {
		if err := copyFile(from, filepath.Join(c.root, "bin", to)); err != nil {
			t.Fatal(err)
		}
	}
	if devNull {
		if err := unix.Mknod(filepath.Join(c.root, "dev", "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(c.root, "dev", "null"), 0o666)
	}
	return c
}

// staticBuild is bashcall built with CGO_ENABLED=0, for the containers,
// where the test binary links the C library (cgo is on where there is a C
// compiler, and the tests import net).
var staticBuild = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(testBase, "static-bashcall")
	c := exec.Command("go", "build", "-o", bin, ".")
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := c.CombinedOutput(); err != nil {
		return "", fmt.Errorf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	return bin, nil
})

// staticBashcall returns a static bashcall: the test binary where it is
// static, else staticBuild.
func staticBashcall(t *testing.T) string {
	t.Helper()
	if f, err := elf.Open(os.Args[0]); err == nil && !hasInterp(f) {
		return os.Args[0]
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("the test binary is not static and there is no go to build one: %v", err)
	}
	bin, err := staticBuild()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func hasInterp(f *elf.File) bool {
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// how is how the container is run: without /proc, or with its root bind
// mounted onto itself (as container runtimes make it, a mount root) rather
// than a plain directory chrooted into.
type how struct{ noProc, mountRoot bool }

// run runs script with the container's bash in one new PID namespace, as
// its PID 1, chrooted; the files named in files are written to /work
// first, and everything in /work is read back after.
func (c *container) run(script string, h how, files map[string]string) map[string]string {
	c.t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(c.root, "work", name), []byte(content), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		c.t.Fatal(err)
	}
	args := []string{"--mount", "--pid", "--fork"}
	if !h.noProc {
		args = append(args, "--mount-proc="+filepath.Join(c.root, "proc"))
	}
	inner := []string{chroot, c.root, "/bin/bash", "-c", "cd /work && " + script}
	if h.mountRoot {
		inner = append([]string{"/bin/sh", "-c", `mount --rbind "$1" "$1" && shift && exec "$@"`, "sh", c.root}, inner...)
	}
	cmd := exec.Command("unshare", append(args, inner...)...)
	cmd.Env = []string{"PATH=/bin", "HOME=/root", "BASHCALL_TEST_MAIN=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("unshare %q: %v\n%s", cmd.Args, err, out)
	}
	got := map[string]string{"": string(out)}
	entries, _ := os.ReadDir(filepath.Join(c.root, "work"))
	for _, en := range entries {
		if b, err := os.ReadFile(filepath.Join(c.root, "work", en.Name())); err == nil {
			got[en.Name()] = string(b)
		}
	}
	return got
}

// TestContainer: in a minimal tree like the Dockerfile's, with /proc and
// one long-lived PID namespace, a confined foreground call runs (and is
// confined), a background task started by one invocation is read to its
// end by a later, separate one, and doctor passes. Chrooted into a plain
// directory, git hooks and config are protected by snapshot (no private
// mount tree can be made there); with the root a mount, as a container
// runtime makes it, by a private mount namespace.
func TestContainer(t *testing.T) {
	requireABI(t, 1)
	for _, tt := range []struct {
		name       string
		h          how
		protection string
	}{
		{"chroot", how{}, "degraded protection: snapshot;"},
		{"mount_root", how{mountRoot: true}, "ok       protection: private mount namespace;"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newContainer(t, true)
			got := c.run(containerScript, tt.h, containerCalls)
			for name, want := range map[string]string{
				"fg.out":     `"text":"hi from bash 5\n"`,
				"w.txt":      "w\n",
				"denied.out": `[sandbox: file access denied under workspace-write mode]`,
				"bg.out":     `"text":"started background task bash-1"`,
				"read.out":   `"text":"one\ntwo\n[status: completed, exit code: 0]"`,
				"doctor.out": tt.protection,
			} {
				if !strings.Contains(got[name], want) {
					t.Errorf("%s = %q, want it to hold %q\n(output: %s)", name, got[name], want, got[""])
				}
			}
			if !strings.HasSuffix(got["doctor.out"], "a call in the default mode can run here\nexit 0\n") {
				t.Errorf("doctor: %q", got["doctor.out"])
			}
			if _, err := os.Stat(filepath.Join(c.root, "bin", "x")); err == nil {
				t.Error("a confined command wrote /bin/x")
			}
		})
	}
}

const containerScript = `
bashcall < fg.json > fg.out
bashcall < denied.json > denied.out
bashcall < bg.json > bg.out
bashcall < read.json > read.out
bashcall doctor > doctor.out 2>&1; echo "exit $?" >> doctor.out
`

const containerSession = `"session":{"id":"S","cwd":"/work"}`

var containerCalls = map[string]string{
	"fg.json":     `{"name":"bash","arguments":{"command":"echo hi from bash $BASH_VERSINFO; echo w > /work/w.txt","description":"d"},` + containerSession + `}`,
	"denied.json": `{"name":"bash","arguments":{"command":"echo x > /bin/x","description":"d"},` + containerSession + `}`,
	"bg.json":     `{"name":"bash","arguments":{"command":"echo one; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo two","description":"d","run_in_background":true},` + containerSession + `}`,
	"read.json":   `{"name":"bash_output","arguments":{"task_id":"bash-1","wait":true,"timeout_ms":30000},` + containerSession + `}`,
}

// TestContainerDevices: in a container whose /dev is a directory of its
// root mount, not a mount of its own, a confined call opens a device in
// /dev alone: a node made elsewhere (in the workspace or not), which
// /dev's filter would not see, is refused by the launcher's namespace,
// with either launcher.
func TestContainerDevices(t *testing.T) {
	requireABI(t, 1)
	c := newContainer(t, true)
	// run reads back each file of /work: the workspace's node is in a
	// directory of its own.
	if err := os.Mkdir(filepath.Join(c.root, "work", "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(c.root, "dev", "shm"), 0o1777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"dev/zero", "work/dev/zero", "tmp/zero", "dev/shm/zero"} {
		if err := unix.Mknod(filepath.Join(c.root, p), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
			t.Fatal(err)
		}
	}
	open := `for f in /dev/zero /work/dev/zero /tmp/zero /dev/shm/zero; do { : < $f; } 2>/dev/null && echo $f opened || echo $f refused; done`
	call := `{"name":"bash","arguments":{"command":"` + open + `","description":"d"},` + containerSession + `}`
	got := c.run("while read -r _ _ _ _ p _; do [ $p = /dev ] && echo $p; done < /proc/self/mountinfo > mounts.out; echo read >> mounts.out; bashcall < call.json > native.out; BASHCALL_LAUNCHER=go bashcall < call.json > go.out",
		how{mountRoot: true}, map[string]string{"call.json": call})
	if got["mounts.out"] != "read\n" {
		t.Fatalf("/dev is a mount in the container: %q", got["mounts.out"])
	}
	for _, name := range []string{"native.out", "go.out"} {
		if want := `"text":"/dev/zero opened\n/work/dev/zero refused\n/tmp/zero refused\n/dev/shm/zero refused\n"`; !strings.Contains(got[name], want) {
			t.Errorf("%s = %q, want it to hold %q\n(output: %s)", name, got[name], want, got[""])
		}
	}
}

// TestContainerWithout: what such a container gets without each need.
// Without /proc a confined call and a background start fail naming
// /proc/self/exe; with bashcall as PID 1, doctor warns that background
// tasks die with it; without /dev/null no command runs.
func TestContainerWithout(t *testing.T) {
	requireABI(t, 1)
	call := `{"name":"bash","arguments":{"command":"echo hi","description":"d"},"session":{"id":"S","cwd":"/work"}}`
	start := `{"name":"bash","arguments":{"command":"echo hi","description":"d","run_in_background":true},"session":{"id":"S","cwd":"/work"}}`
	t.Run("proc", func(t *testing.T) {
		c := newContainer(t, true)
		got := c.run("bashcall < fg.json > fg.out; bashcall < bg.json > bg.out; bashcall doctor > doctor.out 2>&1; echo \"exit $?\" >> doctor.out",
			how{noProc: true}, map[string]string{"fg.json": call, "bg.json": start})
		for name, want := range map[string]string{
			"fg.out":     "Error: cannot start the command: " + noProcReason,
			"bg.out":     "Error: cannot start the background task: " + noProcReason,
			"doctor.out": "missing  /proc: cannot re-execute bashcall through /proc/self/exe (no such file or directory)",
		} {
			if !strings.Contains(got[name], want) {
				t.Errorf("%s = %q, want it to hold %q", name, got[name], want)
			}
		}
		if !strings.HasSuffix(got["doctor.out"], "exit 1\n") {
			t.Errorf("doctor without /proc: %q, want exit 1", got["doctor.out"])
		}
	})
	t.Run("pid1", func(t *testing.T) {
		c := newContainer(t, true)
		got := c.run("exec bashcall doctor > doctor.out", how{}, nil)
		if !strings.Contains(got["doctor.out"], "degraded pid 1: bashcall is PID 1 of its PID namespace") {
			t.Errorf("doctor as PID 1: %q", got["doctor.out"])
		}
	})
	t.Run("devnull", func(t *testing.T) {
		c := newContainer(t, false)
		got := c.run("bashcall < fg.json > fg.out; bashcall doctor > doctor.out 2>&1; echo \"exit $?\" >> doctor.out",
			how{}, map[string]string{"fg.json": call})
		if !strings.Contains(got["fg.out"], `"text":"Error: internal: open /dev/null: no such file or directory"`) {
			t.Errorf("a call without /dev/null: %q", got["fg.out"])
		}
		if !strings.Contains(got["doctor.out"], "missing  /dev/null") || !strings.HasSuffix(got["doctor.out"], "exit 1\n") {
			t.Errorf("doctor without /dev/null: %q", got["doctor.out"])
		}
	})
}

// TestDockerfile: the image is the tree newContainer builds, so that the
// container tests speak for it: a static bashcall and bash-static as
// /bin/bash on scratch, /tmp sticky and world-writable, HOME=/root,
// PATH=/bin.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"FROM scratch\n",
		"install -y --no-install-recommends bash-static",
		"CGO_ENABLED=0 go build -trimpath -ldflags \"-s -w\" -o /rootfs/bin/bashcall .",
		"cp /bin/bash-static /rootfs/bin/bash",
		"mkdir -m 1777 /rootfs/tmp",
		"mkdir -m 0700 /rootfs/root",
		"COPY --from=build /rootfs /\n",
		"ENV PATH=/bin HOME=/root\n",
		"ENTRYPOINT [\"/bin/bashcall\"]\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}
