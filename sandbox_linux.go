package main

// Landlock through raw system calls, and the launcher: a re-executed
// bashcall that confines itself and execs the shell, so that the long-lived
// bashcall process is never restricted.
//
// Kernel documentation: https://docs.kernel.org/userspace-api/landlock.html

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rulesetAttr mirrors struct landlock_ruleset_attr up to ABI 7.
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// size is how much of the struct the kernel of this ABI knows: older
// kernels reject a larger struct whose extra fields are not zero.
func (a *rulesetAttr) size(abi int) uintptr {
	switch {
	case abi >= 6:
		return 24
	case abi >= 4:
		return 16
	}
	return 8
}

// pathBeneathAttr mirrors struct landlock_path_beneath_attr, which the
// kernel declares packed.
type pathBeneathAttr struct {
	allowedAccess uint64
	parentFD      int32
}

// landlockCreateRuleset wraps landlock_create_ruleset(2).
func landlockCreateRuleset(attr *rulesetAttr, size uintptr, flags uint) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(attr)), size, uintptr(flags))
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// landlockAddRule wraps landlock_add_rule(2) for LANDLOCK_RULE_PATH_BENEATH.
func landlockAddRule(rulesetFD int, attr *pathBeneathAttr) error {
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(attr)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// landlockRestrictSelf wraps landlock_restrict_self(2).
func landlockRestrictSelf(rulesetFD int, flags uint) error {
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rulesetFD), uintptr(flags), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// landlockABI probes the kernel's Landlock ABI version. With
// BASHCALL_DISABLE_LANDLOCK=1 in bashcall's environment it reports none,
// so that a host can see its fail-closed path on any kernel.
func landlockABI() (int, error) {
	v, err := landlockCreateRuleset(nil, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
			return 0, errNoLandlock
		}
		return 0, fmt.Errorf("probing landlock: %w", err)
	}
	return v, nil
}

// landlockErrataFixed is the kernel's mask of fixed Landlock errata; a
// kernel that predates the query (EINVAL) has fixed none that it knows.
func landlockErrataFixed() uint64 {
	mask, err := landlockCreateRuleset(nil, 0, unix.LANDLOCK_CREATE_RULESET_ERRATA)
	if err != nil {
		return 0
	}
	return uint64(mask)
}

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
		status.WriteString("S" + err.Error())
		return errLauncher
	}
	err = unix.Exec(spec.argv[0], spec.argv, os.Environ())
	status.WriteString("E" + fmt.Sprintf("exec %q: %v", spec.argv[0], err))
	return errLauncher
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
		case args[i] == "-deny" && i+1 < len(args):
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

// buildRuleset creates the launch's Landlock ruleset and returns its
// descriptor. It needs no particular thread or process: the native
// launcher gets the ruleset bashcall built.
func buildRuleset(s *launchSpec) (int, error) {
	abi, err := landlockABI()
	if err != nil {
		return -1, err
	}
	plan := planRuleset(s.writable, s.reads, s.netOff, abi, osListDir)
	attr := rulesetAttr{handledAccessFS: uint64(plan.Handled), handledAccessNet: plan.HandledNet, scoped: plan.Scoped}
	rfd, err := landlockCreateRuleset(&attr, attr.size(abi), 0)
	if err != nil {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	for _, r := range plan.Rules {
		if err := addPathRule(rfd, r); err != nil {
			unix.Close(rfd)
			return -1, err
		}
	}
	return rfd, nil
}

// addPathRule adds one rule. A writable path that does not exist grants
// nothing and is skipped; "/" must exist. The paths arrive canonical, so
// they are opened without following any symlink: one swapped in since
// bashcall checked the path (by a command of another call, in /tmp say)
// fails the launcher instead of widening the sandbox.
func addPathRule(rfd int, r landlockRule) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, r.Path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		if errors.Is(err, unix.ENOENT) && r.Path != "/" {
			return nil
		}
		return fmt.Errorf("opening rule path %q: %w", r.Path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat of rule path %q: %w", r.Path, err)
	}
	attr := pathBeneathAttr{allowedAccess: uint64(ruleAccess(r.Access, st.Mode&unix.S_IFMT == unix.S_IFDIR)), parentFD: int32(fd)}
	if err := landlockAddRule(rfd, &attr); err != nil {
		return fmt.Errorf("landlock_add_rule %q: %w", r.Path, err)
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
		a.Unshareflags = syscall.CLONE_NEWNS
	case nsUser:
		a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
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
