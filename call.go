package main

// Answering one call: dispatch to a tool, plan a bash call (paths, mode,
// escalation, sandbox, environment) and run it in the foreground.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// invocation is what one bashcall process knows while it answers.
type invocation struct {
	cfg      config
	stateDir string
	environ  []string
	getenv   func(string) string
	// protected are paths no sandboxed command may write: the state dir,
	// the config file and, when serving, the spool dir.
	protected []string
	// named are the same as the host named them, for the symlinks on the
	// way (controlPaths: a confined call's, not every call's, cost).
	named    []string
	spoolDir string // canonical, when serving
	// others are bashcall's other directories a confined call withholds
	// and protects (ownDirs), read once a call is to be confined.
	others []string
	// abort delivers SIGINT and SIGTERM while a call is answered
	// (signals.go).
	abort chan os.Signal
	// progress streams a foreground run's output to bashcall mcp.
	progress *progressFeed
	// reaper ties the tasks of one owner to the life of a process (the
	// hidden -reaper flag of bashcall mcp's children).
	reaper *reaperTie
	// launchedAs is the name the host ran the server by, for the process
	// of a server's call (launchName).
	launchedAs string
	// textOnly: the response is printed as its text alone (-text).
	textOnly bool
}

// runCall answers the call on stdin.
func runCall(args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c commonFlags
	fs := newFlagSet("bashcall", stderr, &c)
	textFlag := fs.Bool("text", false, "print only the model-facing text of the response")
	progressFlag := fs.Int("progress-fd", -1, "")    // for bashcall mcp; not in the usage
	warmFlag := fs.Bool("warm", false, "")           // for the servers' warm children; not in the usage
	reaperFlag := fs.String("reaper", "", "")        // for bashcall mcp's children; not in the usage
	launchedFlag := fs.String("launched-as", "", "") // for the servers' children: the server's argv[0]
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	// Before the first thread of bashcall's own (the signals'), which
	// the runtime could fail to start.
	if err := roomForThreads(); err != nil {
		data, rerr := readRequest(stdin)
		return answerFailure(data, rerr, stdout, *textFlag, err)
	}
	sigs := catchSignals()
	if testOnlyInProcess {
		defer sigs.stop()
	}
	if f, ok := stdin.(*os.File); ok && isTerminal(f) {
		fmt.Fprintln(stderr, "bashcall: reading one call (JSON) from the terminal; end it with Ctrl-D, or see bashcall -h")
	}
	// The request first, the settings after: a server's warm child
	// (warm.go), started before its call, sees the config as it is when
	// the call comes.
	warmed := *warmFlag && !requestWaiting(stdin)
	if warmed {
		getenv := getenvFrom(environ)
		warmUp(getenv, configPath(c.config, getenv), c.stateDir)
		defer dropPreparedCall() // a call that starts no command leaves it
	}
	data, rerr := readRequest(stdin)
	if warmed {
		boundRulesAhead()
	}
	inv, err := loadSettings(&c, environ, true)
	if err != nil {
		return answerFailure(data, rerr, stdout, *textFlag, err)
	}
	inv.launchedAs = *launchedFlag
	if inv.progress, err = openProgressFeed(*progressFlag); err != nil {
		return usageError{err}
	}
	if inv.reaper, err = parseReaperTie(*reaperFlag); err != nil {
		return usageError{err}
	}
	var req *request
	if err = rerr; err == nil {
		req, err = parseRequest(data)
	}
	if warmed && (err != nil || req.Name != "bash") {
		releaseRulesAhead() // only a bash call launches
	}
	var ir *invalidRequest
	if errors.As(err, &ir) {
		resp := &response{ID: ir.id}
		setError(resp, err)
		if werr := writeResponse(stdout, resp, *textFlag); werr != nil {
			return werr
		}
		return errResponded
	}
	if err != nil {
		return err
	}
	inv.abort = sigs.arm()
	inv.textOnly = *textFlag
	err = writeResponse(stdout, inv.handle(req), *textFlag)
	releaseStdout(stdout)
	return err
}

// releaseStdout lets go of the host's stdout once the response is written
// and what it held released: a server reading its child's stdout to the
// end answers on that, not on the child's exit, which can take a
// millisecond more. Descriptor 1 then reads /dev/null, so that no file
// opened later can take its number.
func releaseStdout(stdout io.Writer) {
	f, ok := stdout.(*os.File)
	if !ok || testOnlyInProcess {
		return
	}
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		dupOnto(int(null.Fd()), int(f.Fd()))
		null.Close()
	}
}

// answerFailure answers a call that bashcall cannot serve at all (a bad
// config, a refused state dir) with an error response, so that a host can
// always parse stdout, and returns err for the exit status and stderr.
func answerFailure(data []byte, rerr error, stdout io.Writer, textOnly bool, err error) error {
	if rerr != nil || len(bytes.TrimSpace(data)) == 0 {
		return err
	}
	resp := &response{}
	if req, perr := parseRequest(data); perr == nil {
		resp.ID, resp.Name = req.ID, req.Name
	}
	why := "internal: " + err.Error()
	if errors.As(err, new(usageError)) {
		why = "invalid configuration: " + err.Error()
	}
	setError(resp, &toolError{why})
	writeResponse(stdout, resp, textOnly)
	return err
}

// writeResponse writes the JSON line, or only the text with -text.
func writeResponse(w io.Writer, r *response, textOnly bool) error {
	defer r.written()
	if textOnly {
		_, err := io.WriteString(w, r.text()) // exactly the model's text: no newline added
		return err
	}
	return encodeResponse(w, r)
}

// handle answers one parsed request. Every failure becomes an error
// response; nothing here ends the process.
func (inv *invocation) handle(req *request) *response {
	resp := &response{ID: req.ID, Name: req.Name, Present: &presentation{}}
	inv.stopDeadCalls()
	var err error
	if t, ok := lookupTool(req.Name); ok {
		err = t.handle(inv, req, resp)
	} else {
		err = errUnknownTool(req.Name)
	}
	if err != nil {
		setError(resp, err)
	}
	if req.ArgsErr == nil {
		resp.Present.Call = callCard(req.Name, req.Args)
	}
	if req.Session.ID != "" && !inv.textOnly { // -text prints no notices: they stay pending
		resp.Notices = inv.takeNotices(ownerKey(req.Session.ID))
	}
	return resp
}

// setError makes resp an error response.
func setError(resp *response, err error) {
	var te *toolError
	msg := err.Error()
	if !errors.As(err, &te) && !errors.As(err, new(*invalidRequest)) {
		msg = "internal: " + msg
	}
	text := textErrorPrefix + msg
	resp.IsError = true
	resp.Content = []textContent{{Type: "text", Text: text}}
	if resp.Present == nil {
		resp.Present = &presentation{}
	}
	resp.Present.Result = genericCard(text)
}

// setText makes resp a successful response with text.
func setText(resp *response, text string, result *card) {
	resp.Content = []textContent{{Type: "text", Text: text}}
	if result == nil {
		result = genericCard(text)
	}
	resp.Present.Result = result
}

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
