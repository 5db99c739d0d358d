package main

// The launcher's seccomp filter (PROTOCOL.md section 7), built from x/sys
// types as classic BPF. It covers what neither Landlock nor dropped
// capabilities do: the owner of a file needs no capability to set its
// setuid or setgid bit, so a confined command (root's above all) could
// leave behind a setuid copy of a shell for any local user to run. The
// filter refuses, with EPERM, every chmod, mknod and file creation whose
// mode carries S_ISUID or S_ISGID. openat2 (whose mode sits in a struct
// the filter cannot read) answers ENOSYS, so that callers fall back to
// openat; io_uring, which would bypass the filter, answers ENOSYS too. So
// do inotify and fanotify, which Landlock does not govern: a watch on the
// spill directory would name every spill file as it is opened, where the
// directory itself cannot be listed. Tools fall back to polling.
// System calls of another architecture (32-bit ones on a 64-bit kernel)
// answer ENOSYS: their numbers mean other calls.
//
// Landlock scopes signals, not every call that reaches another process of
// the same user without ptrace's check: prlimit64 on another pid (a CPU
// limit of one second kills bashcall, the host or another session's task;
// a descriptor limit of one blinds bashcall's reaping and repairs), and
// setting another process's scheduling, nice or I/O priority. Each is
// allowed on the caller alone, named by pid 0, and refused with EPERM
// otherwise (which includes naming the caller by its own pid, and a
// user's or, for setpriority and ioprio_set, a process group's every
// process). The kernel's keyrings are not namespaced (root's user keyring
// is every root process's): keyctl, add_key and request_key are refused
// with EPERM, as Docker's profile does.
//
// No new user namespace (unshare, clone), and none joined: the owner of a
// user namespace needs no capability to enter it and has every one
// there, so a root command that can open one made by another root
// process (bound on a file, say) would get CAP_DAC_OVERRIDE back over
// root's files. setns is refused with EPERM whatever its namespace type:
// a descriptor's type 0 joins a user namespace too, and every other type
// needs a capability in the caller's own user namespace, which a confined
// command has none of.

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompCheck is what the filter does with one system call.
type seccompCheck struct {
	nr      uint32
	flagArg int // the open flags argument, -1: the call always creates
	modeArg int // the mode argument; -1: refuse the call (errno)
	errno   unix.Errno
	// unixOnly allows the call only when its first argument (a socket's
	// family) is AF_UNIX: the network filter.
	unixOnly bool
	// selfOnly allows the call only when argument pidArg (a pid_t) is 0,
	// and, where whichArg is set, argument 0 (which) is whichSelf.
	selfOnly  bool
	pidArg    int
	whichSelf uint32
	whichArg  bool
	// denyBits refuses the call when argument 0 has any of these bits
	// (clone's and unshare's flags): no new user namespace.
	denyBits uint32
	// denyCmd refuses the call when argument 1 equals it (fcntl's
	// F_SETLEASE).
	denyCmd uint32
}

// selfChecks are the calls on another process that Landlock's scoping
// does not cover, allowed on the caller alone (see above), and the
// keyring's calls. PRIO_PROCESS and IOPRIO_WHO_PROCESS name one process
// (pid 0: the caller).
func selfChecks() []seccompCheck {
	const prioProcess, ioprioWhoProcess = 0, 1
	return []seccompCheck{
		{nr: unix.SYS_PRLIMIT64, selfOnly: true, pidArg: 0, errno: unix.EPERM},
		{nr: unix.SYS_SCHED_SETAFFINITY, selfOnly: true, pidArg: 0, errno: unix.EPERM},
		{nr: unix.SYS_SCHED_SETSCHEDULER, selfOnly: true, pidArg: 0, errno: unix.EPERM},
		{nr: unix.SYS_SCHED_SETPARAM, selfOnly: true, pidArg: 0, errno: unix.EPERM},
		{nr: unix.SYS_SCHED_SETATTR, selfOnly: true, pidArg: 0, errno: unix.EPERM},
		{nr: unix.SYS_SETPRIORITY, selfOnly: true, pidArg: 1, whichArg: true, whichSelf: prioProcess, errno: unix.EPERM},
		{nr: unix.SYS_IOPRIO_SET, selfOnly: true, pidArg: 1, whichArg: true, whichSelf: ioprioWhoProcess, errno: unix.EPERM},
		{nr: unix.SYS_UNSHARE, denyBits: unix.CLONE_NEWUSER, errno: unix.EPERM},
		{nr: unix.SYS_CLONE, denyBits: unix.CLONE_NEWUSER, errno: unix.EPERM},
		{nr: unix.SYS_CLONE3, modeArg: -1, errno: unix.ENOSYS}, // flags in memory: callers fall back to clone
		{nr: unix.SYS_SETNS, modeArg: -1, errno: unix.EPERM},
		{nr: unix.SYS_FCNTL, denyCmd: unix.F_SETLEASE, errno: unix.EPERM},
		{nr: unix.SYS_KEYCTL, modeArg: -1, errno: unix.EPERM},
		{nr: unix.SYS_ADD_KEY, modeArg: -1, errno: unix.EPERM},
		{nr: unix.SYS_REQUEST_KEY, modeArg: -1, errno: unix.EPERM},
	}
}

// socketChecks refuse, with EACCES, every socket but a unix one, so that
// network = "off" covers UDP, raw, netlink and every other family.
func socketChecks() []seccompCheck {
	return []seccompCheck{
		{nr: unix.SYS_SOCKET, unixOnly: true, errno: unix.EACCES},
		{nr: unix.SYS_SOCKETPAIR, unixOnly: true, errno: unix.EACCES},
	}
}

// setIDBits are the mode bits no confined command may set.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// oTmpfile is __O_TMPFILE, the bit of O_TMPFILE that is not O_DIRECTORY.
const oTmpfile = unix.O_TMPFILE &^ unix.O_DIRECTORY

// seccompData offsets (struct seccomp_data): nr, arch, then the arguments
// as 64-bit values; the low half comes first on the little-endian
// architectures this filter is built for.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

func bpfStmt(code uint16, k uint32) unix.SockFilter {
	return unix.SockFilter{Code: code, K: k}
}

func bpfJump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

func retErrno(e unix.Errno) unix.SockFilter {
	return bpfStmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ERRNO|uint32(e))
}

var retAllow = bpfStmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW)

// buildSeccomp assembles the filter for an architecture's checks.
func buildSeccomp(arch uint32, maxNr uint32, checks []seccompCheck) []unix.SockFilter {
	prog := []unix.SockFilter{
		bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch),
		bpfJump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, arch, 1, 0),
		retErrno(unix.ENOSYS),
		bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr),
	}
	if maxNr != 0 { // x86-64: the x32 ABI sets bit 30
		prog = append(prog, bpfJump(unix.BPF_JMP|unix.BPF_JGE|unix.BPF_K, maxNr, 0, 1), retErrno(unix.ENOSYS))
	}
	for _, c := range checks {
		body := checkBody(c)
		prog = append(prog, bpfJump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, c.nr, 0, uint8(len(body))))
		prog = append(prog, body...)
	}
	return append(prog, retAllow)
}

// checkBody is the code run for one matched system call; it always ends
// in a return, so that the next check starts unmatched.
func checkBody(c seccompCheck) []unix.SockFilter {
	if c.unixOnly {
		return []unix.SockFilter{
			bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArgs),
			bpfJump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.AF_UNIX, 0, 1),
			retAllow,
			retErrno(c.errno),
		}
	}
	if c.denyCmd != 0 {
		return []unix.SockFilter{
			bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArgs+8),
			bpfJump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, c.denyCmd, 0, 1),
			retErrno(c.errno),
			retAllow,
		}
	}
	if c.denyBits != 0 {
		return []unix.SockFilter{
			bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArgs),
			bpfJump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, c.denyBits, 0, 1),
			retErrno(c.errno),
			retAllow,
		}
	}
	if c.selfOnly {
		var body []unix.SockFilter
		if c.whichArg {
			body = append(body,
				bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArgs),
				bpfJump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, c.whichSelf, 1, 0),
				retErrno(c.errno))
		}
		// The low half alone: the kernel reads a pid_t, an int.
		return append(body,
			bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, uint32(offArgs+8*c.pidArg)),
			bpfJump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, 0, 0, 1),
			retAllow,
			retErrno(c.errno))
	}
	if c.modeArg < 0 {
		return []unix.SockFilter{retErrno(c.errno)}
	}
	var body []unix.SockFilter
	if c.flagArg >= 0 {
		// Not creating: the mode argument means nothing.
		body = append(body,
			bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, uint32(offArgs+8*c.flagArg)),
			bpfJump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, unix.O_CREAT|oTmpfile, 1, 0),
			retAllow)
	}
	return append(body,
		bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, uint32(offArgs+8*c.modeArg)),
		bpfJump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, setIDBits, 0, 1),
		retErrno(c.errno),
		retAllow)
}

// installSeccomp loads the filter on the calling thread, with the network
// filter when netOff. no_new_privs must be set already.
func installSeccomp(netOff bool) error {
	prog, err := seccompProgram(netOff)
	if err != nil || prog == nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_SECCOMP): %w", err)
	}
	return nil
}

// seccompProgram is the filter for a launch, nil where this architecture
// has none (see seccompArch).
func seccompProgram(netOff bool) ([]unix.SockFilter, error) {
	arch, maxNr, checks := seccompArch()
	if checks == nil {
		if netOff {
			return nil, errors.New(`no seccomp filter for this architecture: network = "off" cannot be enforced`)
		}
		return nil, nil
	}
	checks = append(checks, selfChecks()...)
	if netOff {
		checks = append(checks, socketChecks()...)
	}
	return buildSeccomp(arch, maxNr, checks), nil
}

// seccompEnforced reports whether this architecture has a filter.
func seccompEnforced() bool {
	_, _, checks := seccompArch()
	return checks != nil
}
