package main

// The bash tool: plan a call (paths, mode, escalation, sandbox,
// environment) and run it in the foreground, or start it in the
// background (supervisor.go).

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// callPlan is a bash call ready to run.
type callPlan struct {
	workspace string
	workdir   string
	sandbox   *sandboxPlan
	argv      []string
	command   []string // argv without the launcher
	env       []string
	timeoutMs int64
}

// bash answers the bash tool.
func (inv *invocation) bash(req *request, resp *response) error {
	if req.ArgsErr != nil {
		return req.ArgsErr
	}
	a, err := parseBashArgs(req.Args)
	if err != nil {
		return err
	}
	if a.Background && !inv.cfg.Background.Enabled {
		return errBackgroundDisabled()
	}
	if a.Background && !processIdentity {
		return toolErrorf("run_in_background is not supported on %s: without /proc start times a reused pid could be signalled", runtime.GOOS)
	}
	p := &callPlan{timeoutMs: inv.cfg.TimeoutMs}
	if a.TimeoutMs > 0 {
		p.timeoutMs = a.TimeoutMs
	}
	p.timeoutMs = min(p.timeoutMs, inv.cfg.MaxTimeoutMs)
	if p.workspace, p.workdir, err = inv.resolveDirs(&req.Session, a.Workdir); err != nil {
		return err
	}
	owner := ownerKey(req.Session.ID)
	if a.Background {
		if err := inv.checkTaskLimit(owner); err != nil {
			return err
		}
	}
	mode, err := inv.resolveMode(req, &a)
	if err != nil {
		return err
	}
	if err := inv.pinSession(&req.Session, p.workspace, mode == modeFullAccess && !a.Background); err != nil {
		return err
	}
	if err := inv.planRun(p, mode, &a, &req.Session); err != nil {
		return err
	}
	// Only a call that would run once approved reaches a person.
	if a.Escalate != "" {
		if err := inv.approve(req, &a, resp); err != nil {
			return err
		}
		// The grant was resolved before the wait, the rules are made
		// after it: a symlink made or changed on the way to a withheld
		// path meanwhile would have them grant its new target.
		if p.sandbox.confined() && !sameGrant(inv.readGrant(), p.sandbox.Reads) {
			return errGrantChanged()
		}
	}
	if a.Background {
		releaseRulesAhead() // the task's own process launches it
		return inv.startTask(p, &a, owner, resp)
	}
	return inv.foreground(p, resp)
}

// sandboxes reports whether the executor confines by default, which is
// what makes escalation exist at all (PROTOCOL.md section 7).
func (inv *invocation) sandboxes() bool { return inv.cfg.Sandbox.Mode != modeFullAccess }

// escalationAdvertised says whether a denial carries the escalation marker.
func (inv *invocation) escalationAdvertised() bool {
	return inv.sandboxes() && inv.cfg.Approval.Policy != "never"
}

// resolveMode is the mode the call runs in once approved: the escalation
// it asks for, else the session's standing mode, else the default.
func (inv *invocation) resolveMode(req *request, a *bashArgs) (string, error) {
	current := inv.standingMode(req.Session.ID)
	if a.Escalate == "" {
		return current, nil
	}
	if !inv.sandboxes() {
		return "", errNoEscalation()
	}
	if !strictlyWider(a.Escalate, current) {
		return "", errNotWider(a.Escalate, current)
	}
	return a.Escalate, nil
}

// planRun decides the sandbox, environment and argv of the call.
func (inv *invocation) planRun(p *callPlan, mode string, a *bashArgs, s *session) error {
	shell, err := lookShell(inv.cfg.Shell, inv.getenv("PATH"))
	if err != nil {
		return err
	}
	// What confined calls wrote: where no shell is run from, and what
	// this call adds to if it is confined.
	var written []string
	if inv.sandboxes() || mode != modeFullAccess {
		if written, err = inv.writtenPaths(); err != nil {
			return err
		}
	}
	if err := inv.checkShell(shell, p.workspace, written); err != nil {
		return err
	}
	var extraEnv, extra []string
	if mode == modeWorkspaceWrite {
		if cache := inv.sandboxCache(s.ID); cache != "" {
			extra = append(extra, cache)
			extraEnv = append(extraEnv, "XDG_CACHE_HOME="+cache)
		}
	}
	// The host is probed, and the paths a confined call is built around
	// are worked out, only for a confined call: an unconfined one uses
	// neither.
	var sup support
	if mode != modeFullAccess {
		sup = sandboxSupport(inv.getenv)
	}
	in := sandboxInput{mode: mode, workspace: p.workspace, roots: inv.cfg.Sandbox.WritableRoots, extra: extra,
		netOff: inv.cfg.Sandbox.Network == "off", netFiltered: sup.NetFilter}
	if mode != modeFullAccess {
		if inv.others, err = ownDirs(inv.getenv, inv.stateDir); err != nil {
			return err
		}
		in.control, in.reads = inv.controlPaths(), inv.readGrant()
	}
	if p.sandbox, err = planSandboxWith(in, sup.ABI, sup.ABIErr); err != nil {
		return err
	}
	if p.sandbox.confined() {
		p.sandbox.GoLauncher = inv.getenv("BASHCALL_LAUNCHER") == "go"
		p.sandbox.Controls, p.sandbox.Others = in.control, inv.otherWorkspaces(p.workspace, p.sandbox.Writable)
		if err := inv.noteWritten(written, p.sandbox.Writable); err != nil {
			return fmt.Errorf("listing the paths the call makes writable: %w", err)
		}
		p.sandbox.Remembered = inv.rememberedTops(s.ID, p.workspace)
		if err := p.sandbox.protect(sup.NS); err != nil {
			return err
		}
		inv.rememberTops(s.ID, p.sandbox.Remembered, p.sandbox.Guard.Found)
	}
	p.env = commandEnv(inv.environ, &inv.cfg.Env, extraEnv, inv.stateDir, s.ID)
	p.argv = []string{shell, "-c", a.Command}
	p.command = p.argv
	if p.sandbox.confined() {
		p.argv = p.sandbox.launcherArgs(p.argv)
	}
	return nil
}

// foreground runs the call to completion and renders its result.
func (inv *invocation) foreground(p *callPlan, resp *response) error {
	select {
	case <-inv.abort:
		return errAborted()
	default:
	}
	if err := setSubreaper(); err != nil {
		return fmt.Errorf("becoming a child subreaper: %w", err)
	}
	budget := &spillCap{stateDir: inv.stateDir, limit: inv.cfg.MaxSpillTotalBytes}
	stdout := newCapture(inv.cfg.MaxOutputBytes, inv.cfg.MaxSpillBytes, budget, "stdout")
	stderr := newCapture(inv.cfg.MaxOutputBytes, inv.cfg.MaxSpillBytes, budget, "stderr")
	resp.holdUntilWritten(stdout.release, stderr.release)
	outW, errW, endProgress := inv.progress.tee(stdout, stderr)
	call := inv.trackCall()
	defer call.done()
	out, err := runCommand(&runSpec{
		Argv: p.argv, Dir: p.workdir, Env: p.env, Stdout: outW, Stderr: errW,
		Timeout: time.Duration(p.timeoutMs) * time.Millisecond, Grace: inv.grace(),
		Abort: inv.abort, Forked: warmEncoder, Launcher: p.sandbox.confined(), NS: p.sandbox.NS, GoLauncher: p.sandbox.GoLauncher, Subreaper: true, Track: call.track,
		WithoutNS: func() ([]string, error) { return p.sandbox.withoutNamespace(p.command) },
	})
	endProgress()
	// The command's tree is gone: put back what it changed of the
	// protected files, whatever became of it.
	reverted, restoreErr := p.sandbox.Guard.restore()
	if err != nil {
		return startError(err)
	}
	r := &foregroundResult{Kind: "foreground", TimedOut: out.TimedOut, Aborted: out.Aborted,
		TimeoutMs: p.timeoutMs, Stdout: stdout.result(), Stderr: stderr.result()}
	if out.RunnerFailure != "" {
		return sandboxUnavailable(p.sandbox.Mode, out.RunnerFailure)
	}
	if out.Signal != 0 {
		name := signalName(out.Signal)
		r.Signal = &name
	} else {
		r.ExitCode = &out.ExitCode
	}
	facts := p.sandbox.Facts
	facts.classify(r.ExitCode, r.Stderr.Text)
	facts.restored(reverted, restoreErr)
	r.Sandbox = &facts
	resp.StructuredContent = r
	if out.Aborted {
		return errAborted()
	}
	setText(resp, renderForeground(r, inv.escalationAdvertised()), terminalCard(r, inv.escalationAdvertised()))
	return nil
}

// startError words a command that could not be started.
func startError(err error) error {
	var se *errStart
	if errors.As(err, &se) {
		return toolErrorf("cannot start the command: %v", se.err)
	}
	return err
}

// grace is the configured SIGTERM-to-SIGKILL delay.
func (inv *invocation) grace() time.Duration {
	return time.Duration(inv.cfg.GraceMs) * time.Millisecond
}
