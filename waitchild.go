package main

import "syscall"

// waitChildBlocking reaps the child pid in a blocking wait4.
func waitChildBlocking(pid int) syscall.WaitStatus {
	var ws syscall.WaitStatus
	reapChild(pid, &ws, 0)
	return ws
}

// reapChild reaps pid into ws, reporting false when WNOHANG found it
// still running.
func reapChild(pid int, ws *syscall.WaitStatus, flags int) bool {
	for {
		wpid, err := syscall.Wait4(pid, ws, flags, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err == nil && wpid == 0:
			return false
		}
		return true
	}
}
