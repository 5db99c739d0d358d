//go:build !linux

package main

// Landlock exists only on Linux. Elsewhere every confined mode fails closed
// with the sandbox-unavailable error; only danger-full-access runs.

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// landlockABI reports that no Landlock is available.
func landlockABI() (int, error) {
	return 0, errors.New("landlock is only supported on Linux")
}

// runLauncher refuses: there is nothing to confine a command with.
func runLauncher(args []string) error {
	return errors.New("the sandbox launcher is only supported on Linux")
}

// warmNativeLauncher has nothing to ready: nothing is launched confined.
func warmNativeLauncher() {}

// prepareReadRules has no ruleset to make.
func prepareReadRules(readGrant, bool) {}

// releaseRulesAhead has none to release, nor boundRulesAhead to bound.
func releaseRulesAhead() {}
func boundRulesAhead()   {}

// mountNamespace reports none: there is no launcher to give one to.
func mountNamespace() nsKind { return nsNone }

// launcherSysProcAttr is childSysProcAttr: no namespaces here.
func launcherSysProcAttr(_ nsKind, freeze bool) *syscall.SysProcAttr { return childSysProcAttr(freeze) }

// hardenProcess marks inherited descriptors close-on-exec, as far as
// /dev/fd lists them.
func hardenProcess() error {
	fds, err := os.ReadDir("/dev/fd")
	if err != nil {
		return nil
	}
	for _, e := range fds {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

// prepareFork has nothing to ready.
func prepareFork(nsKind) (undo func()) { return func() {} }

// sandboxSupport reports no sandbox at all.
func sandboxSupport(func(string) string) support {
	abi, err := landlockABI()
	return support{ABI: abi, ABIErr: err}
}

// mountNSID has no namespace to name.
func mountNSID() string { return "" }

// nativeLaunch declines: there is no launcher here.
func nativeLaunch(*runSpec) ([]string, []*os.File, bool) { return nil, nil, false }

// launcherReport says there is no launcher.
func launcherReport(func(string) string) string { return "launcher: none (only Linux confines calls)" }

// nativeExecRefused: there is no native launcher to refuse.
func nativeExecRefused(error, string) bool { return false }

// namespaceRefusedHere: there are no namespaces here.
func namespaceRefusedHere(nsKind) bool { return true }
