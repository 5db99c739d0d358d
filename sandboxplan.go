package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Planning one confined call: its writable set, read grant, network,
// namespace and planted-code protection, the launcher command line that
// carries them, and the report of what this host supports.

// sandboxPlan is how one call is confined.
type sandboxPlan struct {
	Mode     string
	Writable []string // canonical paths, for the launcher
	Dirs     []string // the writable directories among them
	Reads    readGrant
	NetOff   bool
	Scope    bool // scope signals and abstract sockets
	NS       nsKind
	// GoLauncher: bashcall itself is the launcher, not the native one
	// (BASHCALL_LAUNCHER=go).
	GoLauncher bool `json:",omitempty"`
	Guard      *gitGuard
	Facts      sandboxFacts
	// Controls and Others feed the guard: control paths whose modes the
	// snapshot mechanism puts back, other sessions' workspaces.
	Controls []string `json:",omitempty"`
	Others   []string `json:",omitempty"`
	// Remembered are the workspace's submodule checkouts that earlier
	// calls found (rememberedTops).
	Remembered []string `json:",omitempty"`
}

// confined reports whether the plan runs the command through the launcher.
func (p *sandboxPlan) confined() bool { return p.Mode != modeFullAccess }

// launcherArgs is the launcher's command line for argv.
func (p *sandboxPlan) launcherArgs(argv []string) []string {
	args := []string{selfExe(), launcherArg}
	if p.NS != nsNone {
		// The launcher checks that it is not in this mount namespace
		// before it changes any mount.
		args = append(args, "-ns", mountNSID())
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
	g, err := planGitGuard(p.Dirs, p.Others, p.Remembered, p.Controls, ns == nsNone)
	if err != nil {
		return toolErrorf("refusing to run under %s: %v", p.Mode, err)
	}
	p.Guard = g
	return nil
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
			if within(d, w) && exists(d) { // one not there is the command's to make
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

// support is what this host can give a confined call, for version and
// doctor.
type support struct {
	ABI       int
	ABIErr    error
	Errata    uint64 // the Landlock errata the kernel reports fixed
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
	lines := []string{
		fmt.Sprintf("landlock: ABI %d", s.ABI),
		fmt.Sprintf("confined calls: enforcement %s; %s", enforcement(s.ABI), scope),
		reads, network, privs, setid, protect,
	}
	for _, e := range missingErrata(s.ABI, s.Errata) {
		lines = append(lines, "landlock "+e.what+" (not fixed in this kernel)")
	}
	return lines
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

// exists reports whether p may be there (it is, or cannot be told not
// to be), not following a last symlink.
func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}
