package main

// The native launcher (launcher/launcher.c): a static program of a few
// kilobytes that bashcall execs instead of re-executing itself, so that a
// confined call pays no second Go start. bashcall builds what needs no
// particular process (the Landlock ruleset, the seccomp program) and
// hands it over as descriptors; the launcher arranges its mount
// namespace, drops its privileges, confines itself and execs the command,
// as runLauncher does. It is embedded for amd64 and arm64 and run from a
// sealed memfd. Where it is missing, where memfds cannot be executed
// (vm.memfd_noexec = 2), or with BASHCALL_LAUNCHER=go, bashcall re-executes
// itself as the launcher instead.

//go:generate sh launcher/build.sh

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The native launcher's descriptors beyond the status pipe (3).
const (
	nativeRulesetFD = 4 // the Landlock ruleset
	nativeProgramFD = 5 // 'P' and the seccomp program, or 'S' and why not
	nativeSelfFD    = 6 // the launcher's memfd, which it closes at once
)

var native struct {
	once sync.Once
	file *os.File
	err  error
	// refused is set once executing the memfd failed: this process
	// launches with bashcall itself from then on.
	refused atomic.Bool
}

// nativeExecRefused reports whether err, from starting the native
// launcher in dir, says the memfd may not be executed (EACCES from a
// security module or a noexec policy, ENOEXEC), and if so gives it up for
// good. An EACCES counts only where dir can be entered: it is also what
// the change into a directory that cannot be gives. EPERM is left to
// namespaceRefused: it is what a seccomp profile that forbids namespaces
// answers.
func nativeExecRefused(err error, dir string) bool {
	if dir == "" {
		dir = "."
	}
	if errors.Is(err, unix.EACCES) && unix.Access(dir, unix.X_OK) == nil || errors.Is(err, unix.ENOEXEC) {
		native.refused.Store(true)
		return true
	}
	return false
}

// nativeLauncher returns the sealed memfd holding the native launcher,
// made once per process, or why there is none.
func nativeLauncher() (*os.File, error) {
	native.once.Do(func() { native.file, native.err = makeNativeLauncher(nativeLauncherBytes) })
	return native.file, native.err
}

// makeNativeLauncher writes b to a memfd that nobody can change any more:
// sealed against writes, growth and shrinking, and against new seals.
func makeNativeLauncher(b []byte) (*os.File, error) {
	if len(b) == 0 {
		return nil, errors.New("no native launcher for this architecture")
	}
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate("bashcall-launcher", flags|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // a kernel before MFD_EXEC (6.3)
		fd, err = unix.MemfdCreate("bashcall-launcher", flags)
	}
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "bashcall-launcher")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing the native launcher: %w", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealing the native launcher: %w", err)
	}
	return f, nil
}

// warmNativeLauncher makes the launcher's memfd ahead of a call (warmUp),
// except where the kernel refuses executable memfds (vm.memfd_noexec = 2):
// there trying logs a kernel warning, which a warm child whose call needs
// no launcher would then cause.
func warmNativeLauncher() {
	if b, err := readProcFile("/proc/sys/vm/memfd_noexec"); err == nil && strings.TrimSpace(string(b)) >= "2" {
		return
	}
	nativeLauncher()
}

// launcherReport says which launcher confines a call here.
func launcherReport(getenv func(string) string) string {
	if getenv("BASHCALL_LAUNCHER") == "go" {
		return "launcher: bashcall itself (BASHCALL_LAUNCHER=go)"
	}
	if _, err := nativeLauncher(); err != nil {
		return fmt.Sprintf("launcher: bashcall itself (no native launcher: %v)", err)
	}
	return fmt.Sprintf("launcher: native (%d bytes, static, run from a sealed memfd)", len(nativeLauncherBytes))
}

// nativeLaunch readies spec's launch for the native launcher: the argv to
// execute and the descriptors to add after the status pipe. It returns
// ok false where the Go launcher is to run instead. A ruleset or program
// that cannot be built is not an error here: the launcher reports it on
// the status pipe like any other confinement failure, and nothing runs.
func nativeLaunch(spec *runSpec) (argv []string, files []*os.File, ok bool) {
	if !spec.Launcher || spec.GoLauncher || native.refused.Load() || len(spec.Argv) < 2 || spec.Argv[1] != launcherArg {
		return nil, nil, false
	}
	self, err := nativeLauncher()
	if err != nil {
		return nil, nil, false
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, false
	}
	defer w.Close()
	ruleset := r
	msg, rfd := nativeConfinement(spec.Argv[2:])
	if rfd >= 0 {
		ruleset = os.NewFile(uintptr(rfd), "landlock-ruleset")
	}
	if msg[0] != 'P' && len(msg) > 4096 {
		msg = msg[:4096] // a reason, cut short; a program is sent whole
	}
	w.Write(msg) // far below a pipe's capacity: never blocks
	argv = append([]string{"/proc/self/fd/" + strconv.Itoa(nativeSelfFD)}, spec.Argv[1:]...)
	return argv, []*os.File{ruleset, r, self}, true
}

// nativeConfinement builds the ruleset and the program for launcher
// arguments: the ruleset descriptor and 'P' with the program, or -1 and
// why not, of its failureKind.
func nativeConfinement(args []string) ([]byte, int) {
	s, err := parseLauncherArgs(args)
	if err != nil {
		return failure(err), -1
	}
	prog, err := seccompProgram(s.netOff)
	if err == nil && len(prog) == 0 {
		err = errors.New("no seccomp filter for this architecture")
	}
	if err != nil {
		return failure(err), -1
	}
	rfd, err := buildRuleset(s)
	if err != nil {
		return failure(err), -1
	}
	size := len(prog) * int(unsafe.Sizeof(prog[0]))
	return append([]byte{'P'}, unsafe.Slice((*byte)(unsafe.Pointer(&prog[0])), size)...), rfd
}

// failure is the launcher's message for err: its kind, then why.
func failure(err error) []byte { return append([]byte{failureKind(err)}, err.Error()...) }
