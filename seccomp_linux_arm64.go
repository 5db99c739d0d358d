package main

import "golang.org/x/sys/unix"

// seccompArch is the filter's table for arm64 (see seccomp_linux.go),
// which has only the *at system calls.
func seccompArch() (arch, maxNr uint32, checks []seccompCheck) {
	return unix.AUDIT_ARCH_AARCH64, 0, []seccompCheck{
		{nr: unix.SYS_OPENAT, flagArg: 2, modeArg: 3, errno: unix.EPERM},
		{nr: unix.SYS_FCHMOD, flagArg: -1, modeArg: 1, errno: unix.EPERM},
		{nr: unix.SYS_FCHMODAT, flagArg: -1, modeArg: 2, errno: unix.EPERM},
		{nr: unix.SYS_FCHMODAT2, flagArg: -1, modeArg: 2, errno: unix.EPERM},
		{nr: unix.SYS_MKNODAT, flagArg: -1, modeArg: 2, errno: unix.EPERM},
		{nr: unix.SYS_OPENAT2, modeArg: -1, errno: unix.ENOSYS},
		{nr: unix.SYS_IO_URING_SETUP, modeArg: -1, errno: unix.ENOSYS},
		{nr: unix.SYS_INOTIFY_INIT1, modeArg: -1, errno: unix.ENOSYS},
		{nr: unix.SYS_FANOTIFY_INIT, modeArg: -1, errno: unix.ENOSYS},
	}
}
