package main

// A container runtime's seccomp profile (Docker's default) refuses new
// namespaces. bashcall must then fall back to snapshots, not fail every
// confined call: this test runs it under such a filter.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// init installs, when asked, a filter on every thread of the re-executed
// test binary that refuses unshare and clone of a mount or user
// namespace with EPERM and clone3 with ENOSYS, as Docker's profile does;
// with BASHCALL_TEST_REFUSE_NS=EACCES, with EACCES, as a security module
// that denies user namespaces does.
func init() {
	refusal := unix.EPERM
	switch os.Getenv("BASHCALL_TEST_REFUSE_NS") {
	case "1":
	case "EACCES":
		refusal = unix.EACCES
	default:
		return
	}
	const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUSER
	check := []unix.SockFilter{
		bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArgs),
		bpfJump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, nsFlags, 0, 1),
		retErrno(refusal),
		retAllow,
	}
	prog := []unix.SockFilter{
		bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr),
		bpfJump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.SYS_CLONE3, 0, 1),
		retErrno(unix.ENOSYS),
		bpfJump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.SYS_UNSHARE, 1, 0),
		bpfJump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.SYS_CLONE, 0, uint8(len(check))),
	}
	prog = append(append(prog, check...), retAllow)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		fmt.Fprintln(os.Stderr, "installing the namespace filter:", errno)
		os.Exit(125)
	}
}

// TestNamespaceRefused: under a profile that refuses namespaces, a
// confined foreground call and a background task still run, confined,
// with their planted-code paths protected by snapshot.
func TestNamespaceRefused(t *testing.T) {
	requireABI(t, 1)
	for _, refusal := range []string{"1", "EACCES"} {
		t.Run(refusal, func(t *testing.T) { namespaceRefusedRun(t, refusal) })
	}
}

func namespaceRefusedRun(t *testing.T, refusal string) {
	e := newConfinedEnv(t, "")
	e.extraEnv = []string{"BASHCALL_TEST_REFUSE_NS=" + refusal}
	newRepo(t, e.workspace)
	os.Remove("/etc/bashcall-ns-test")
	defer os.Remove("/etc/bashcall-ns-test")
	plant := `echo planted >> .git/hooks/pre-commit; touch /etc/bashcall-ns-test; echo ran`
	r := e.call(sessionCall(plant, "S", e.workspace, ""))
	text := r.text()
	if !strings.Contains(text, "ran\n") || !strings.Contains(text, "[sandbox: reverted changes to protected files: "+filepath.Join(e.workspace, ".git", "hooks")) {
		t.Errorf("foreground under a namespace-refusing profile:\n%s", text)
	}
	if _, err := os.Stat("/etc/bashcall-ns-test"); err == nil {
		os.Remove("/etc/bashcall-ns-test")
		t.Error("the command ran unconfined")
	}
	start := e.call(sessionCall(plant, "S", e.workspace, `"run_in_background":true`))
	if start.text() != textStarted("bash-1") {
		t.Fatalf("background start: %q", start.text())
	}
	out := e.call(sessionReq("bash_output", `{"task_id":"bash-1","wait":true}`, "S")).text()
	if !strings.Contains(out, "ran\n") || !strings.Contains(out, "reverted changes to protected files") {
		t.Errorf("background under a namespace-refusing profile:\n%s", out)
	}
	if _, err := os.Stat("/etc/bashcall-ns-test"); err == nil {
		t.Error("the background command ran unconfined")
	}
	if b, _ := os.ReadFile(filepath.Join(e.workspace, ".git", "hooks", "pre-commit")); len(b) > 0 {
		t.Errorf("the planted hook stayed: %q", b)
	}
}
