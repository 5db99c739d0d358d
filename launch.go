package main

// Starting a command's process: the shell itself, or the launcher that
// confines itself and execs the shell (the native one, else bashcall
// itself), and the launcher's verdict on its status pipe.

import (
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
)

// forkLauncher starts spec.Argv. When the kernel (or a seccomp profile, as
// in a container) refuses the launcher's namespace, it asks
// spec.WithoutNS for the plan without one and starts that instead.
func forkLauncher(spec *runSpec, fds []uintptr) (int, error) {
	for {
		argv, files, native := nativeLaunch(spec)
		if !native {
			argv = spec.Argv
			releaseRulesAhead() // only the native launcher takes it
		}
		all := fds
		for _, f := range files {
			all = append(all[:len(all):len(all)], f.Fd())
		}
		undo := prepareFork(spec.NS)
		pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
			Dir: spec.Dir, Env: spec.Env, Files: all, Sys: launcherSysProcAttr(spec.NS, spec.FreezeLeader),
		})
		undo()
		for _, f := range files[:min(len(files), 2)] { // not the shared memfd
			f.Close()
		}
		if err != nil && native && nativeExecRefused(err, spec.Dir) {
			// A security module or a noexec mount refused to run the
			// memfd: bashcall itself is the launcher from now on.
			spec.GoLauncher = true
			continue
		}
		if err == nil || spec.NS == nsNone || spec.WithoutNS == nil || !namespaceRefused(err) {
			return pid, err
		}
		// EACCES is also entering a directory that cannot be entered (one
		// whose group a user namespace does not map, and whose mode a
		// command of another call can change at any moment): the call
		// goes on without the namespace only if a probe with nothing else
		// in the way is refused one too.
		if errors.Is(err, syscall.EACCES) && !namespaceRefusedHere(spec.NS) {
			return pid, err
		}
		argv, ferr := spec.WithoutNS()
		if ferr != nil {
			return 0, ferr
		}
		spec.Argv, spec.NS = argv, nsNone
	}
}

// launcherStatus is the launcher's verdict.
type launcherStatus struct {
	failure string // confinement failed: the command did not run
	execErr error  // the shell could not be executed
}

// readLauncherStatus reads the status pipe to EOF: nothing when the exec
// succeeded, "S<detail>" when confinement failed, "E<detail>" when the
// command could not be started (the shell not executed, its directory
// not entered, the host short of descriptors or memory: failureKind).
func readLauncherStatus(r *os.File) launcherStatus {
	b, _ := io.ReadAll(io.LimitReader(r, 4096))
	msg := strings.TrimSpace(string(b))
	switch {
	case msg == "":
		return launcherStatus{}
	case msg[0] == 'S':
		return launcherStatus{failure: validText([]byte(msg[1:]))}
	}
	return launcherStatus{execErr: errors.New(validText([]byte(msg[1:])))}
}
