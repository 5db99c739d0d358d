package main

// Sandbox policy, independent of the kernel: modes, the Landlock ABI table,
// the rules a mode needs, the denial classifier and escalation.
//
// Landlock is an allow-list. Every mode lets the command read and execute
// everywhere; read-only lets it write only /dev/null; workspace-write also
// lets it write the session workspace, /tmp and [sandbox] writable_roots.
// Because a rule on a directory covers everything beneath it, nothing below
// a writable root can be carved out again: a call whose writable roots would
// contain the state dir, the spool dir or the config file is refused rather
// than run with bashcall's own state exposed to the command.

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
)

// launcherArg is the hidden first argument that selects the launcher.
const launcherArg = "__launch"

// launcherStatusFD is the descriptor of the launcher's status pipe. The
// launcher marks it close-on-exec, so a successful exec closes it with
// nothing written, and nothing the command does can write to it.
const launcherStatusFD = 3

// Sandbox modes, narrowest first.
const (
	modeReadOnly       = "read-only"
	modeWorkspaceWrite = "workspace-write"
	modeFullAccess     = "danger-full-access"
)

var modes = []string{modeReadOnly, modeWorkspaceWrite, modeFullAccess}

func validMode(m string) bool { return modeRank(m) >= 0 }

// modeRank orders the modes by what they allow; -1 for an unknown mode.
func modeRank(m string) int {
	for i, x := range modes {
		if x == m {
			return i
		}
	}
	return -1
}

// strictlyWider reports whether target allows strictly more than current.
// An unknown current mode is never widened.
func strictlyWider(target, current string) bool {
	return modeRank(current) >= 0 && modeRank(target) > modeRank(current)
}

// accessFS is a set of Landlock filesystem rights (include/uapi/linux/landlock.h,
// LANDLOCK_ACCESS_FS_*). The values are pinned to x/sys in a test.
type accessFS uint64

const (
	accessExecute accessFS = 1 << iota
	accessWriteFile
	accessReadFile
	accessReadDir
	accessRemoveDir
	accessRemoveFile
	accessMakeChar
	accessMakeDir
	accessMakeReg
	accessMakeSock
	accessMakeFifo
	accessMakeBlock
	accessMakeSym
	accessRefer
	accessTruncate
	accessIoctlDev
)

// Landlock scopes (LANDLOCK_SCOPE_*), from ABI 6.
const (
	scopeAbstractUnixSocket uint64 = 1 << iota
	scopeSignal
)

const (
	// accessABI1 is every right Landlock ABI 1 governs.
	accessABI1 = accessExecute | accessWriteFile | accessReadFile | accessReadDir |
		accessRemoveDir | accessRemoveFile | accessMakeChar | accessMakeDir |
		accessMakeReg | accessMakeSock | accessMakeFifo | accessMakeBlock | accessMakeSym
	// accessRead is what every mode grants on "/".
	accessRead = accessExecute | accessReadFile | accessReadDir
	// accessFile is what a rule on a non-directory may hold.
	accessFile = accessExecute | accessWriteFile | accessReadFile | accessTruncate | accessIoctlDev
)

// abiInfo is what one Landlock ABI version governs.
type abiInfo struct {
	fs     accessFS
	scoped uint64
}

// abiVersions is indexed by ABI version; see the kernel's
// Documentation/userspace-api/landlock.rst, "Previous limitations".
var abiVersions = []abiInfo{
	0: {},
	1: {fs: accessABI1},
	2: {fs: accessABI1 | accessRefer},
	3: {fs: accessABI1 | accessRefer | accessTruncate},
	4: {fs: accessABI1 | accessRefer | accessTruncate}, // adds TCP rights only
	5: {fs: accessABI1 | accessRefer | accessTruncate | accessIoctlDev},
	6: {fs: accessABI1 | accessRefer | accessTruncate | accessIoctlDev, scoped: scopeAbstractUnixSocket | scopeSignal},
	7: {fs: accessABI1 | accessRefer | accessTruncate | accessIoctlDev, scoped: scopeAbstractUnixSocket | scopeSignal}, // adds audit logging only
}

// abiSupport clamps a probed ABI to the newest version bashcall knows.
func abiSupport(abi int) abiInfo {
	if abi < 0 {
		abi = 0
	}
	return abiVersions[min(abi, len(abiVersions)-1)]
}

// enforcement says whether the kernel governs every right a confined mode
// needs: truncation (ABI 3) and device ioctls (ABI 5) included.
func enforcement(abi int) string {
	if abiSupport(abi).fs == abiVersions[len(abiVersions)-1].fs {
		return "full"
	}
	return "partial"
}

// scoped reports whether signals and abstract unix sockets are scoped.
func scoped(abi int) bool {
	want := scopeAbstractUnixSocket | scopeSignal
	return abiSupport(abi).scoped&want == want
}

// landlockRule grants access beneath one path.
type landlockRule struct {
	Path   string
	Access accessFS
}

// rulesetPlan is what the launcher asks the kernel for.
type rulesetPlan struct {
	Handled    accessFS
	HandledNet uint64 // TCP bind and connect, handled with no rule: denied
	Scoped     uint64
	Rules      []landlockRule
}

// Landlock network rights (LANDLOCK_ACCESS_NET_*), from ABI 4.
const (
	accessNetBindTCP uint64 = 1 << iota
	accessNetConnectTCP
)

// planRuleset is the ruleset for a confined run at a given ABI: read and
// execute everywhere but what reads withholds, every governed right but
// device creation beneath each writable path, and with netOff every TCP
// bind and connect denied.
func planRuleset(writable []string, reads readGrant, netOff bool, abi int, list listDir) rulesetPlan {
	sup := abiSupport(abi)
	p := rulesetPlan{Handled: sup.fs, Scoped: sup.scoped}
	if netOff {
		p.HandledNet = accessNetBindTCP | accessNetConnectTCP
	}
	p.Rules = planReadRules(reads, accessRead&sup.fs, list)
	// Device nodes are never created, not even where writing is granted.
	for _, w := range writable {
		p.Rules = append(p.Rules, landlockRule{Path: w, Access: sup.fs &^ (accessMakeChar | accessMakeBlock)})
	}
	return p
}

// ruleAccess keeps only file rights in a rule on a non-directory, which the
// kernel otherwise rejects with EINVAL.
func ruleAccess(a accessFS, isDir bool) accessFS {
	if isDir {
		return a
	}
	return a & accessFile
}

// nsKind is how the launcher gets a private mount namespace.
type nsKind int

const (
	nsNone  nsKind = iota // none: planted-code paths are snapshotted
	nsMount               // a mount namespace (bashcall has CAP_SYS_ADMIN)
	nsUser                // a user namespace with a mount namespace
)

// sandboxPlan is how one call is confined.
type sandboxPlan struct {
	Mode     string
	Writable []string // canonical paths, for the launcher
	Dirs     []string // the writable directories among them
	Reads    readGrant
	NetOff   bool
	Scope    bool // scope signals and abstract sockets
	NS       nsKind
	Guard    *gitGuard
	Facts    sandboxFacts
	// Controls and Others feed the guard: control paths whose modes the
	// snapshot mechanism puts back, other sessions' workspaces.
	Controls []string `json:",omitempty"`
	Others   []string `json:",omitempty"`
}

// confined reports whether the plan runs the command through the launcher.
func (p *sandboxPlan) confined() bool { return p.Mode != modeFullAccess }

// launcherArgs is the launcher's command line for argv.
func (p *sandboxPlan) launcherArgs(argv []string) []string {
	args := []string{selfExe(), launcherArg}
	if p.NS != nsNone {
		args = append(args, "-ns")
		for _, pin := range p.Guard.Pins {
			args = append(args, "-pin", pin)
		}
		for _, ro := range p.Guard.readOnly() {
			args = append(args, "-p", ro)
		}
	}
	for _, w := range p.Writable {
		args = append(args, "-w", w)
	}
	for _, d := range p.Reads.Denied {
		args = append(args, "-deny", d)
	}
	for _, f := range p.Reads.FilesOnly {
		args = append(args, "-rf", f)
	}
	if p.NetOff {
		args = append(args, "-net", "off")
	}
	return append(append(args, "--"), argv...)
}

// protect plans the planted-code protection of a confined call: bound
// read-only in a mount namespace where one can be had, else snapshotted.
func (p *sandboxPlan) protect(ns nsKind) error {
	if !p.confined() {
		return nil
	}
	p.NS = ns
	g, err := planGitGuard(p.Dirs, p.Others, p.Controls, ns == nsNone)
	if err != nil {
		return toolErrorf("refusing to run under %s: %v", p.Mode, err)
	}
	p.Guard = g
	return nil
}

// errNoLandlock is the reason a confined mode cannot be enforced.
var errNoLandlock = errors.New("landlock is not supported by this kernel or not enabled at boot time")

// sandboxUnavailable is the contract's fail-closed error.
func sandboxUnavailable(mode, runnerFailure string) error {
	msg := fmt.Sprintf("sandbox mode %q is requested but no sandbox backend is usable on this host; refusing to run the command unconfined. Use a Linux kernel with Landlock enabled, or set the mode to danger-full-access.", mode)
	if runnerFailure != "" {
		msg += " Runner failure: " + runnerFailure
	}
	return &toolError{msg}
}

// planSandbox decides how a call in mode runs. abi is the probed Landlock
// ABI (0 with probeErr when there is none); workspace is the canonical
// session workspace; roots are [sandbox] writable_roots; extra are more
// writable directories of bashcall's own (the session's build cache);
// control are paths the command must never be able to write or replace
// (PROTOCOL.md section 7), whether they exist or not.
func planSandbox(mode, workspace string, roots, extra, control []string, abi int, probeErr error) (*sandboxPlan, error) {
	return planSandboxWith(sandboxInput{mode: mode, workspace: workspace, roots: roots, extra: extra, control: control}, abi, probeErr)
}

// sandboxInput is what planSandboxWith confines a call by.
type sandboxInput struct {
	mode, workspace     string
	roots, extra        []string
	control             []string
	reads               readGrant
	netOff, netFiltered bool // netFiltered: the seccomp socket filter exists here
}

// planSandboxWith is planSandbox with read confinement and the network.
func planSandboxWith(in sandboxInput, abi int, probeErr error) (*sandboxPlan, error) {
	mode, workspace, roots, extra, control := in.mode, in.workspace, in.roots, in.extra, in.control
	p := &sandboxPlan{Mode: mode, Facts: sandboxFacts{Mode: mode}}
	if mode == modeFullAccess {
		return p, nil
	}
	if probeErr != nil || abi < 1 {
		return nil, sandboxUnavailable(mode, "")
	}
	if mode == modeWorkspaceWrite {
		p.Dirs = append(p.Dirs, workspace, canonicalOr("/tmp"))
		for _, r := range roots {
			c := canonicalOr(r)
			if c != filepath.Clean(r) {
				return nil, toolErrorf("refusing to run under %s: the writable root %q is reached through a symlink (it resolves to %q); name the real path in [sandbox] writable_roots", mode, r, c)
			}
			p.Dirs = append(p.Dirs, c)
		}
		p.Dirs = append(p.Dirs, extra...)
	}
	for _, d := range writableDevices {
		p.Writable = append(p.Writable, canonicalOr(d))
	}
	p.Writable = append(p.Writable, p.Dirs...)
	for _, w := range p.Dirs {
		for _, q := range control {
			if q != "" && (within(q, w) || within(w, q)) {
				return nil, toolErrorf("refusing to run under %s: the writable path %q overlaps %q, which a sandboxed command must not be able to change; move bashcall's state dir, spool dir, config file and executable outside the workspace, /tmp and [sandbox] writable_roots", mode, w, q)
			}
		}
	}
	for _, w := range p.Dirs {
		for _, d := range in.reads.Denied {
			if within(d, w) {
				return nil, toolErrorf("refusing to run under %s: the writable path %q contains %q, which must stay unreadable ([sandbox] deny_read or bashcall's state dir), and a writable directory cannot withhold a subtree", mode, w, d)
			}
		}
	}
	if in.netOff && (abi < 4 || !in.netFiltered) {
		return nil, sandboxUnavailable(mode, `[sandbox] network = "off" needs Landlock ABI 4 and a seccomp filter for this architecture`)
	}
	p.Reads, p.NetOff = in.reads, in.netOff
	p.Scope = scoped(abi)
	p.Facts.Enforcement = enforcement(abi)
	p.Facts.Scoped = p.Scope
	p.Facts.Network = "on"
	if in.netOff {
		p.Facts.Network = "off"
	}
	return p, nil
}

// writableDevices are writable in every confined mode. /dev/tty is among
// them because a command has no controlling terminal: opening it fails
// with ENXIO ("No such device or address"), which is the truth, where a
// Landlock denial would send the model after a wider sandbox mode.
var writableDevices = []string{"/dev/null", "/dev/tty"}

// canonicalOr resolves symlinks in p, or returns it cleaned when it does not
// resolve (a writable root that does not exist yet grants nothing).
func canonicalOr(p string) string {
	if c, err := filepath.EvalSymlinks(p); err == nil {
		return c
	}
	return filepath.Clean(p)
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// denialSignatures are the stderr texts of a file-permission failure. The
// last is what renaming over a path bound read-only in the launcher's
// mount namespace gives (git config writes config.lock, then renames it).
var denialSignatures = []string{"permission denied", "read-only file system", "operation not permitted", "device or resource busy"}

// classifyDenied reports a sandbox denial: a non-zero exit (not a signal)
// under a confined mode whose stderr carries a file-permission signature.
func classifyDenied(mode string, exitCode *int, stderrTail string) bool {
	if mode == modeFullAccess || exitCode == nil || *exitCode == 0 {
		return false
	}
	lower := strings.ToLower(stderrTail)
	for _, s := range denialSignatures {
		if strings.Contains(lower, s) {
			return true
		}
	}
	return false
}

// support is what this host can give a confined call, for version and
// doctor.
type support struct {
	ABI       int
	ABIErr    error
	NS        nsKind
	Seccomp   bool // setuid and setgid bits are refused
	NetFilter bool // sockets other than unix ones can be refused
	Bounding  bool // the bounding set is emptied too
}

// report describes the support in lines of "name: what holds".
func (s support) report() []string {
	if s.ABIErr != nil || s.ABI < 1 {
		return []string{
			fmt.Sprintf("landlock: unavailable (%v)", s.ABIErr),
			"confined calls: refused (fail closed); only danger-full-access runs",
		}
	}
	scope := "signals and abstract unix sockets not scoped (needs ABI 6)"
	if scoped(s.ABI) {
		scope = "signals and abstract unix sockets scoped"
	}
	privs := "capabilities: all dropped (effective, permitted, inheritable, ambient, bounding); no_new_privs"
	if !s.Bounding {
		privs = "capabilities: effective, permitted, inheritable and ambient dropped; bounding set kept (no CAP_SETPCAP), no_new_privs keeps exec from granting any"
	}
	setid := "setuid/setgid bits: refused (seccomp)"
	if !s.Seccomp {
		setid = "setuid/setgid bits: not refused on this architecture"
	}
	protect := "protection: private mount namespace; every mount outside the writable set read-only (no chmod, chown or utime there); git hooks and config bound read-only"
	if s.NS == nsNone {
		protect = "protection: snapshot; git hooks and config restored after each call; mode changes to bashcall's own files repaired; chmod of the user's other files not prevented"
	}
	reads := "reads: confined; the state dir and [sandbox] deny_read withheld, spill files readable by exact path"
	network := `network: "off" enforceable (Landlock TCP rights and a seccomp socket filter)`
	if s.ABI < 4 || !s.NetFilter {
		network = `network: "off" not enforceable here (needs Landlock ABI 4 and a seccomp filter); a confined call with network = "off" is refused`
	}
	return []string{
		fmt.Sprintf("landlock: ABI %d", s.ABI),
		fmt.Sprintf("confined calls: enforcement %s; %s", enforcement(s.ABI), scope),
		reads, network, privs, setid, protect,
	}
}

// networkSignatures are the stderr texts of a failure for want of the
// network: a refused socket or connection, a name that cannot resolve.
var networkSignatures = []string{"socket", "connect", "/dev/tcp/", "/dev/udp/", "network is unreachable",
	"resolve", "name resolution", "name or service not known", "getaddrinfo", "address family not supported"}

// classify sets the denial facts of a finished confined run: with the
// network off, a failure whose stderr speaks of sockets, connections or
// name resolution is a network denial; else one with a file-permission
// signature is a file denial.
func (f *sandboxFacts) classify(exitCode *int, stderrTail string) {
	f.Denied = classifyDenied(f.Mode, exitCode, stderrTail)
	if f.Network != "off" || exitCode == nil || *exitCode == 0 {
		return
	}
	lower := strings.ToLower(stderrTail)
	for _, s := range networkSignatures {
		if strings.Contains(lower, s) {
			f.Denied, f.NetworkDenied = false, true
			return
		}
	}
}

// namespaceRefused reports whether starting a process in a new namespace
// failed because the namespace was refused (no privilege, a seccomp
// profile, a user namespace limit), not for any other reason.
func namespaceRefused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) || errors.Is(err, syscall.EACCES)
}

// withoutNamespace re-plans a confined plan whose namespace was refused:
// the planted-code paths are snapshotted instead of bound, and argv (the
// command after the launcher) is launched without -ns.
func (p *sandboxPlan) withoutNamespace(argv []string) ([]string, error) {
	if err := p.protect(nsNone); err != nil {
		return nil, err
	}
	return p.launcherArgs(argv), nil
}
