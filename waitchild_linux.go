package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// waitChild reaps the child pid and returns its status. It waits on a
// pidfd in the runtime's poller, so that no thread of bashcall is held in
// a blocking wait4 (a thread the runtime would start another one beside);
// where the kernel has no non-blocking pidfd (before 5.10), it blocks in
// wait4.
func waitChild(pid int) syscall.WaitStatus {
	if fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK); err == nil {
		f := os.NewFile(uintptr(fd), "pidfd")
		defer f.Close()
		if rc, err := f.SyscallConn(); err == nil {
			var ws syscall.WaitStatus
			done := false
			if rc.Read(func(uintptr) bool { done = reapChild(pid, &ws, syscall.WNOHANG); return done }) == nil && done {
				return ws
			}
		}
	}
	return waitChildBlocking(pid)
}
