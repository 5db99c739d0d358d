package main

// The Go launcher (bashcall re-executed as "__launch"), which confines
// itself and execs the shell so that the long-lived bashcall process is
// never restricted, and what this host can give a confined call. The
// native launcher (nativelauncher_linux.go) takes the same arguments and
// steps; Landlock itself is landlock_linux.go.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// launchSpec is what the launcher is told on its command line.
type launchSpec struct {
	writable  []string // canonical paths the command may write
	protected []string // canonical paths bound read-only in the namespace
	pins      []string // canonical directories bound onto themselves
	reads     readGrant
	netOff    bool
	mountNS   bool   // the launcher runs in a private mount namespace
	parentNS  string // bashcall's mount namespace, which it must not be in
	argv      []string
}

// runLauncher is bashcall re-executed as
// "__launch [-ns] [-w PATH]... [-pin PATH]... [-p PATH]... -- ARGV...": it confines itself
// and execs ARGV. A failure is written to the status pipe ("S" sandbox,
// "E" exec) and the launcher exits 125.
func runLauncher(args []string) error {
	var st unix.Stat_t
	if unix.Fstat(launcherStatusFD, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return errors.New("__launch is internal to bashcall: it needs its status pipe as descriptor 3")
	}
	status := os.NewFile(launcherStatusFD, "status")
	spec, err := parseLauncherArgs(args)
	if err == nil {
		runtime.LockOSThread() // Landlock, capabilities and no_new_privs bind the calling thread.
		err = confineSelf(spec)
	}
	if err != nil {
		status.Write(append([]byte{failureKind(err)}, err.Error()...))
		return errLauncher
	}
	err = unix.Exec(spec.argv[0], spec.argv, os.Environ())
	status.WriteString("E" + fmt.Sprintf("exec %q: %v", spec.argv[0], err))
	return errLauncher
}

// startFailure is a launcher's failure that is not confinement's: the
// command's directory could not be entered.
type startFailure struct{ err error }

func (e *startFailure) Error() string { return e.err.Error() }
func (e *startFailure) Unwrap() error { return e.err }

// failureKind is the status pipe's kind of a launcher's failure: 'E', the
// command could not be started, for a startFailure and where the host ran
// short of descriptors, memory or processes, as a fork or an open can (a
// later call may run; the runner-failure text would send the model after
// danger-full-access for it); else 'S', confinement failed. The native
// launcher's kindOf is the same.
func failureKind(err error) byte {
	var sf *startFailure
	for _, short := range []error{unix.EMFILE, unix.ENFILE, unix.ENOMEM, unix.EAGAIN} {
		if errors.Is(err, short) {
			return 'E'
		}
	}
	if errors.As(err, &sf) {
		return 'E'
	}
	return 'S'
}

// parseLauncherArgs splits "[-ns] [-w PATH]... [-pin PATH]... [-p PATH]... -- ARGV".
func parseLauncherArgs(args []string) (*launchSpec, error) {
	s := &launchSpec{}
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--" && i+1 < len(args):
			s.argv = args[i+1:]
			return s, nil
		case args[i] == "-ns" && i+1 < len(args):
			s.mountNS, s.parentNS = true, args[i+1]
			i++
		case args[i] == "-w" && i+1 < len(args):
			s.writable = append(s.writable, args[i+1])
			i++
		case args[i] == "-p" && i+1 < len(args):
			s.protected = append(s.protected, args[i+1])
			i++
		case args[i] == "-pin" && i+1 < len(args):
			s.pins = append(s.pins, args[i+1])
			i++
		case args[i] == "-deny" && i+1 < len(args) && filepath.IsAbs(args[i+1]):
			s.reads.Denied = append(s.reads.Denied, args[i+1])
			i++
		case args[i] == "-rf" && i+1 < len(args):
			s.reads.FilesOnly = append(s.reads.FilesOnly, args[i+1])
			i++
		case args[i] == "-net" && i+1 < len(args) && args[i+1] == "off":
			s.netOff = true
			i++
		default:
			return nil, fmt.Errorf("launcher usage: unexpected %q", args[i])
		}
	}
	return nil, errors.New("launcher usage: no command after --")
}

// confineSelf confines the calling thread, in this order: descriptors
// beyond the status pipe closed, the mount namespace arranged (while the
// capabilities to do it remain), every capability dropped, no_new_privs,
// the Landlock ruleset, the seccomp filter.
func confineSelf(s *launchSpec) error {
	if _, err := unix.FcntlInt(launcherStatusFD, unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return err
	}
	if err := unix.CloseRange(launcherStatusFD+1, ^uint(0), 0); err != nil {
		return fmt.Errorf("close_range: %w", err)
	}
	if s.mountNS {
		if id := mountNSID(); id == "" || id == s.parentNS {
			return errors.New("the launcher is not in a mount namespace of its own: it changes no mount")
		}
		if err := confineMounts(s.writable, s.pins, s.protected); err != nil {
			return err
		}
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := restrictSelf(s); err != nil {
		return err
	}
	return installSeccomp(s.netOff)
}

// Secure bits (include/uapi/linux/securebits.h): root gains no
// capabilities by exec or by a change of uid, for good.
const (
	secbitNoroot              = 1 << 0
	secbitNorootLocked        = 1 << 1
	secbitNoSetuidFixup       = 1 << 2
	secbitNoSetuidFixupLocked = 1 << 3
	secbitKeepCapsLocked      = 1 << 5
	secbitNoCapAmbientRaise   = 1 << 6
	secbitNoCapAmbientLocked  = 1 << 7
)

// dropCapabilities empties every capability set: bounding (so that an exec
// as root gains nothing back), ambient, inheritable, permitted, effective.
// Without CAP_SETPCAP (an unprivileged bashcall) the bounding set and the
// secure bits cannot change; no_new_privs then keeps exec from granting
// file capabilities.
func dropCapabilities() error {
	if hasCapability(unix.CAP_SETPCAP) {
		bits := secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
			secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientLocked
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_SECUREBITS): %w", err)
		}
		for c := 0; ; c++ {
			err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
			if errors.Is(err, unix.EINVAL) {
				break // past the last capability this kernel knows
			}
			if err != nil {
				return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// hasCapability reports whether c is in this thread's effective set.
func hasCapability(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	return data[c/32].Effective&(1<<(uint(c)%32)) != 0
}

// restrictSelf sets no_new_privs and enforces the launch's ruleset on the
// calling thread.
func restrictSelf(s *launchSpec) error {
	rfd, err := buildRuleset(s)
	if err != nil {
		return err
	}
	defer unix.Close(rfd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := landlockRestrictSelf(rfd, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// mountNamespace says how the launcher can get a private mount namespace:
// as root with CAP_SYS_ADMIN, a plain one; otherwise a user namespace
// when the kernel lets unprivileged users make one.
func mountNamespace() nsKind {
	if !rootIsMount() {
		return nsNone
	}
	if hasCapability(unix.CAP_SYS_ADMIN) {
		return nsMount
	}
	for _, knob := range []struct {
		path string
		no   string
	}{
		{"/proc/sys/user/max_user_namespaces", "0"},
		{"/proc/sys/kernel/unprivileged_userns_clone", "0"},
		{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"},
	} {
		if b, err := os.ReadFile(knob.path); err == nil && strings.TrimSpace(string(b)) == knob.no {
			return nsNone
		}
	}
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return nsNone
	}
	return nsUser
}

// rootIsMount reports whether "/" is the root of a mount. In a chroot into
// a plain directory it is not, and making "/" private, which a new mount
// namespace needs first, fails with EINVAL. A kernel that cannot tell
// (before Linux 5.8) is taken to say yes.
func rootIsMount() bool {
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, "/", 0, 0, &st) != nil || st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return true
	}
	return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}

// launcherSysProcAttr is childSysProcAttr plus the launcher's namespace.
// In a user namespace the command keeps its own uid and gid; other users'
// files show as the overflow id (nobody).
func launcherSysProcAttr(ns nsKind, freeze bool) *syscall.SysProcAttr {
	a := childSysProcAttr(freeze)
	switch ns {
	case nsMount:
		a.Unshareflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC
	case nsUser:
		a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
		// The launcher keeps its uid, so exec would clear the capabilities
		// the new namespace gave it: these two stay, ambient, until it has
		// arranged its mounts and drops every capability.
		a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
	}
	return a
}

// namespaceRefusedHere reports whether the kernel refuses a namespace of
// kind ns here, as a probe with nothing else in its way finds: started in
// /, it runs bashcall's launcher without a status pipe, which exits at
// once. A probe that fails otherwise (no process could be forked) says
// nothing of the namespace: not refused.
func namespaceRefusedHere(ns nsKind) bool {
	undo := prepareFork(ns)
	pid, err := syscall.ForkExec(selfExe(), []string{"bashcall", launcherArg}, &syscall.ProcAttr{
		Dir: "/", Env: []string{}, Sys: launcherSysProcAttr(ns, false),
	})
	undo()
	if err != nil {
		return namespaceRefused(err)
	}
	waitChild(pid)
	return false
}

// hardenProcess is the first thing every bashcall process does. Every
// descriptor the host left open is marked close-on-exec, so that none
// reaches a command, a supervisor or a launcher. The process becomes
// non-dumpable: its memory and /proc files (environ holds what the scrub
// withheld from commands) are out of reach of processes of the same user
// that lack CAP_SYS_PTRACE, confined commands included.
func hardenProcess() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("close_range: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	return nil
}

// prepareFork readies this process to start a launcher in ns, and returns
// what undoes it once the launcher runs. For a user namespace, bashcall
// writes the child's uid_map and gid_map, which the kernel lets only a
// dumpable child's owner do, and a child inherits non-dumpability until
// it execs: bashcall is dumpable for the moment of the fork.
func prepareFork(ns nsKind) (undo func()) {
	if ns != nsUser {
		return func() {}
	}
	unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	return func() { unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
}

// sandboxSupport is what this host can give a confined call, as
// bashcall's environment (getenv) lets it: BASHCALL_PROTECT=snapshot gives
// up the mount namespace for the snapshot mechanism, and
// BASHCALL_DISABLE_LANDLOCK=1 makes the kernel look like one without
// Landlock.
func sandboxSupport(getenv func(string) string) support {
	filter := seccompEnforced()
	s := support{NS: mountNamespace(), Seccomp: filter, NetFilter: filter}
	if getenv("BASHCALL_PROTECT") == "snapshot" {
		s.NS = nsNone
	}
	s.ABI, s.ABIErr = landlockABI()
	if getenv("BASHCALL_DISABLE_LANDLOCK") == "1" {
		s.ABI, s.ABIErr = 0, errNoLandlock
	}
	if s.ABIErr == nil {
		s.Errata = landlockErrataFixed()
	}
	// The bounding set can be emptied with CAP_SETPCAP, which the
	// launcher has as root or in its user namespace.
	s.Bounding = s.NS != nsNone || hasCapability(unix.CAP_SETPCAP)
	return s
}

// mountNSID identifies this process's mount namespace (the inode of
// /proc/self/ns/mnt), "" when it cannot be read.
func mountNSID() string {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/mnt", &st); err != nil {
		return ""
	}
	return strconv.FormatUint(st.Ino, 10)
}
