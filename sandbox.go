package main

// Sandbox policy, independent of the kernel: modes, the Landlock ABI table
// as data, the rules a mode needs, and the denial classifiers.
//
// Landlock is an allow-list. Every mode lets the command read and execute
// everything but what reads withhold (readrules.go); read-only lets it
// write only /dev/null; workspace-write also lets it write the session
// workspace, /tmp and [sandbox] writable_roots. Because a rule on a
// directory covers everything beneath it, nothing below a writable root
// can be carved out again: a call whose writable roots would contain a
// control path (control.go) is refused rather than run with bashcall's own
// state exposed to the command. Planning one call is sandboxplan.go.

import (
	"errors"
	"path/filepath"
	"strings"
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

// landlockErratum is a Landlock bug fixed in later kernels (and in
// backports), which landlock_create_ruleset(2) with
// LANDLOCK_CREATE_RULESET_ERRATA reports as a bit: see the kernel's
// security/landlock/errata/.
type landlockErratum struct {
	bit  uint64 // 1 << (number - 1)
	abi  int    // the first ABI the erratum concerns
	what string
}

// landlockErrata are the errata bashcall knows. None changes what bashcall
// asks of Landlock: go-landlock gives up signal scoping without erratum 2,
// because it restricts every thread of a live Go program one by one. The
// launcher restricts only the thread that execs the command a moment later
// (no signal between its threads is needed in between), and every thread
// of the command inherits that one domain, so scoping is kept.
var landlockErrata = []landlockErratum{
	{1 << 0, 4, "erratum 1: TCP rights also govern other stream sockets (MPTCP, SCTP, SMC), which with network = \"off\" is only stricter"},
	{1 << 1, 6, "erratum 2: signal scoping also stops signals between threads of one process in different domains; the command's threads share one domain"},
	{1 << 2, 1, "erratum 3: a directory moved out of a bind mount is judged by its filesystem alone, which can widen access through a rename or link"},
}

// missingErrata lists the errata that concern abi and that fixed, the
// kernel's mask, does not report as fixed.
func missingErrata(abi int, fixed uint64) []landlockErratum {
	var missing []landlockErratum
	for _, e := range landlockErrata {
		if abi >= e.abi && fixed&e.bit == 0 {
			missing = append(missing, e)
		}
	}
	return missing
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
	Entry  bool // an entry of a split directory (readrules.go)
	NotDir bool // a split path that was no directory: granted only if it still is none
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
	p := rulesetHead(netOff, abi)
	p.Rules = append(planReadRules(reads, accessRead&p.Handled, list), writableRules(writable, p.Handled)...)
	return p
}

// rulesetHead is a ruleset plan's rights, without rules.
func rulesetHead(netOff bool, abi int) rulesetPlan {
	sup := abiSupport(abi)
	p := rulesetPlan{Handled: sup.fs, Scoped: sup.scoped}
	if netOff {
		p.HandledNet = accessNetBindTCP | accessNetConnectTCP
	}
	return p
}

// writableRules are the rules on the writable paths, which come after the
// read rules. Device nodes are never created, not even where writing is
// granted.
func writableRules(writable []string, handled accessFS) []landlockRule {
	rules := make([]landlockRule, 0, len(writable))
	for _, w := range writable {
		rules = append(rules, landlockRule{Path: w, Access: handled &^ (accessMakeChar | accessMakeBlock)})
	}
	return rules
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

// errNoLandlock is the reason a confined mode cannot be enforced.
var errNoLandlock = errors.New("landlock is not supported by this kernel or not enabled at boot time")

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
			f.NetworkDenied = true // denied stays what the contract says: the signature
			return
		}
	}
}
