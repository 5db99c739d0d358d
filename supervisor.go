package main

// Starting a background task and supervising it.
//
// The invocation that starts a task allocates its id, then re-executes
// bashcall as a detached supervisor (its own session) and returns as soon
// as the supervisor says the command runs, or that it settled trying. The
// supervisor is a child subreaper: it runs the command like a foreground
// call without a timeout, writes its output into the task's directory,
// stops the whole tree on SIGTERM (which is how bash_kill asks) and
// records the final status with a write and a rename.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// supervisorArg is the hidden first argument that selects the supervisor.
const supervisorArg = "__supervise"

// taskSpec is what the starter hands the supervisor through a pipe, so
// that the command's environment never touches the disk.
type taskSpec struct {
	Argv     []string  `json:"argv"`
	Dir      string    `json:"dir"`
	Env      []string  `json:"env"`
	Launcher bool      `json:"launcher"`
	NS       nsKind    `json:"ns,omitempty"`
	Guard    *gitGuard `json:"guard,omitempty"`
	// Plan and Command let the supervisor re-plan without a namespace
	// when the kernel refuses one (see forkLauncher).
	Plan    *sandboxPlan `json:"plan,omitempty"`
	Command []string     `json:"command,omitempty"`
	Sandbox sandboxFacts `json:"sandbox"`
}

// startTask starts the planned call as a background task.
func (inv *invocation) startTask(p *callPlan, a *bashArgs, owner string, resp *response) error {
	me := procRecord{PID: os.Getpid(), BootID: bootID()}
	me.Start, _ = procStartTime(me.PID)
	t, err := inv.allocateTask(&taskMeta{Owner: owner, Command: a.Command, Workdir: p.workdir,
		Mode: p.sandbox.Mode, StartedAt: time.Now().UnixMilli(), GraceMs: inv.cfg.GraceMs,
		MaxOutputBytes: inv.cfg.MaxOutputBytes, MaxSpillBytes: inv.cfg.MaxSpillBytes, Starter: me,
		MaxSpillTotalBytes: inv.cfg.MaxSpillTotalBytes, Reaper: inv.reaper.of(owner)})
	if err != nil {
		return err
	}
	spec := &taskSpec{Argv: p.argv, Dir: p.workdir, Env: p.env, Launcher: p.sandbox.confined(), NS: p.sandbox.NS,
		Guard: p.sandbox.Guard, Plan: p.sandbox, Command: p.command, Sandbox: p.sandbox.Facts}
	if err := inv.spawnSupervisor(t, spec); err != nil {
		t.stopLeftovers() // whatever of the command did start
		t.failStart(err)
		inv.consumeNotice(t) // this error response is its notice
		return toolErrorf("cannot start the background task: %v", err)
	}
	resp.StructuredContent = &backgroundResult{Kind: "background", TaskID: t.id}
	setText(resp, textStarted(t.id), nil)
	return nil
}

// spawnSupervisor starts the supervisor and waits until it reports.
func (inv *invocation) spawnSupervisor(t *task, spec *taskSpec) error {
	specR, specW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer specW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		specR.Close()
		return err
	}
	defer readyR.Close()
	logFile, err := openOwn(filepath.Join(t.dir, "supervisor.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND)
	if err != nil {
		specR.Close()
		readyW.Close()
		return err
	}
	pid, err := syscall.ForkExec(selfExe(), []string{"bashcall", supervisorArg, inv.stateDir, t.id}, &syscall.ProcAttr{
		Dir: "/", Env: []string{}, Files: []uintptr{specR.Fd(), readyW.Fd(), logFile.Fd()}, Sys: detachedSysProcAttr(),
	})
	specR.Close()
	readyW.Close()
	logFile.Close()
	if err != nil {
		if rerr := reexecCheck(); rerr != nil {
			return rerr
		}
		return fmt.Errorf("starting the supervisor: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		waitChild(pid)
	}()
	if err := json.NewEncoder(specW).Encode(spec); err != nil {
		return fmt.Errorf("handing the task to its supervisor: %w", err)
	}
	specW.Close()
	if err := waitReady(readyR, exited); err != nil {
		return err
	}
	return t.notStarted()
}

// waitReady waits for the supervisor's answer: "ok", or "error: " and why
// not. A copy of its end of the pipe can outlive it (in a command frozen
// before its exec), so its exit ends the wait too; and an answer other
// than "ok" waits for the exit, so that whoever settles the task finds the
// supervisor gone.
func waitReady(r *os.File, exited <-chan struct{}) error {
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
		line <- l
	}()
	var l string
	select {
	case l = <-line:
		if l == "ok\n" {
			return nil
		}
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
	case <-exited:
		r.SetReadDeadline(time.Now().Add(100 * time.Millisecond)) // for what it wrote before it exited
		if l = <-line; l == "ok\n" {
			return nil
		}
	}
	if why, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), "error: "); ok {
		return errors.New("the supervisor exited before the command started: " + validText([]byte(why)))
	}
	return errors.New("the supervisor exited before the command started")
}

// runSupervisor is bashcall re-executed as "__supervise STATEDIR ID", with
// the task's spec on stdin and its ready pipe on stdout.
func runSupervisor(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 2 {
		return usageError{errors.New("supervisor usage: __supervise STATEDIR ID")}
	}
	// Catch bash_kill's SIGTERM from the first moment the supervisor is on
	// record: one arriving before the command starts stops it at once.
	stops := catchStops()
	inv := &invocation{stateDir: args[0]}
	t, err := inv.loadTask(args[1])
	if err != nil {
		return fmt.Errorf("loading task %q: %w", args[1], err)
	}
	answer := answerOnce(stdout)
	spec, err := t.enlist(stdin)
	if err != nil {
		answer("error: " + err.Error())
		return err
	}
	t.watchReaper(stops)
	// Once the command has run, or could not, the starter is answered "ok"
	// (after the status is recorded, when it ended at once).
	defer answer("ok")
	final, err := t.supervise(spec, func() { answer("ok") }, stops)
	if err != nil {
		answer("error: " + err.Error())
		return err
	}
	err = t.recordRetrying(final)
	if final.noticeDue {
		t.giveNoticeBack()
	}
	return err
}

// stopRequests are the stops asked of a supervisor: bash_kill's SIGTERM
// (or a SIGINT or SIGHUP), its reaper's end, a replanted git file. asked
// is set before a stop is handed to the run, so that one it takes at any
// point (while it drains the pipes too), or not at all, is counted.
type stopRequests struct {
	abort chan os.Signal
	asked atomic.Bool
}

// catchStops catches the signals that stop a supervisor.
func catchStops() *stopRequests {
	s := &stopRequests{abort: make(chan os.Signal, 2)}
	caught := make(chan os.Signal, 2)
	signal.Notify(caught, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for sig := range caught {
			s.ask(sig)
		}
	}()
	return s
}

// ask asks the run to stop.
func (s *stopRequests) ask(sig os.Signal) {
	s.asked.Store(true)
	select {
	case s.abort <- sig:
	default: // stops are pending already
	}
}

// answerOnce writes the first answer it is given to the ready pipe, and
// closes it.
func answerOnce(w io.Writer) func(msg string) {
	return func(msg string) {
		if w != nil {
			io.WriteString(w, msg+"\n")
			if c, ok := w.(io.Closer); ok {
				c.Close()
			}
			w = nil
		}
	}
}

// enlist puts the supervisor on record, keeps the room for the task's
// final status and reads the task's spec.
func (t *task) enlist(stdin io.Reader) (*taskSpec, error) {
	me := procRecord{PID: os.Getpid(), BootID: bootID(), Locked: true}
	me.Start, _ = procStartTime(me.PID)
	if err := writeLockedRecord(filepath.Join(t.dir, "supervisor.json"), &me); err != nil {
		return nil, err
	}
	if err := t.reserveStatus(); err != nil {
		return nil, err
	}
	// bash_kill renames this to its marker (markKilled): a kill needs no
	// new inode, however full the state dir is by then.
	if err := touch(filepath.Join(t.dir, "kill.reserve")); err != nil {
		return nil, err
	}
	var spec taskSpec
	if err := json.NewDecoder(io.LimitReader(stdin, 16<<20)).Decode(&spec); err != nil {
		return nil, fmt.Errorf("reading the task spec: %w", err)
	}
	if len(spec.Argv) == 0 {
		return nil, errors.New("the task spec names no command")
	}
	return &spec, nil
}

// recordRetrying records the final status, and keeps trying while the
// disk refuses it (the status is kept in memory meanwhile), until it is
// written or the task is gone.
func (t *task) recordRetrying(f *taskFinal) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := t.record(f)
		if err == nil || !fileExists(t.dir) {
			return err
		}
		time.Sleep(wait)
	}
}

// supervise runs the command and returns its final status.
func (t *task) supervise(spec *taskSpec, ready func(), stops *stopRequests) (*taskFinal, error) {
	outs, err := openTaskStreams(t, true)
	if err != nil {
		return nil, err
	}
	defer outs[0].close()
	defer outs[1].close()
	if err := setSubreaper(); err != nil {
		return nil, err
	}
	sweep := func() []string { return nil }
	// A task that plants protected git files again after a sweep put one
	// back is stopped as bash_kill's SIGTERM would.
	replanted := func() { stops.ask(syscall.SIGTERM) }
	out, err := runCommand(&runSpec{
		Argv: spec.Argv, Dir: spec.Dir, Env: spec.Env, Stdout: outs[0], Stderr: outs[1],
		Grace: time.Duration(t.meta.GraceMs) * time.Millisecond, Abort: stops.abort,
		Launcher: spec.Launcher, NS: spec.NS, GoLauncher: spec.Plan != nil && spec.Plan.GoLauncher, Subreaper: true, FreezeLeader: true,
		WithoutNS: func() ([]string, error) {
			if spec.Plan == nil {
				return nil, errors.New("no plan to start the task without a namespace")
			}
			argv, err := spec.Plan.withoutNamespace(spec.Command)
			spec.Guard = spec.Plan.Guard
			return argv, err
		},
		Started: func(int) {
			sweep = spec.Guard.sweep(time.Second, replanted)
			ready()
		},
		Track: func(tree *treeRecord) error {
			return writeJSON(filepath.Join(t.dir, "command.json"), tree)
		},
	})
	swept := sweep()
	final := &taskFinal{taskStatus: taskStatus{State: stateKilled}, FinishedAt: time.Now().UnixMilli(), Sandbox: &spec.Sandbox}
	reverted, restoreErr := spec.Guard.restore()
	final.Sandbox.restored(mergeSorted(swept, reverted), restoreErr)
	switch {
	case err != nil:
		fmt.Fprintf(outs[1], "bashcall: %v\n", startError(err))
		final.Note = noteNotStarted
	case out.RunnerFailure != "":
		fmt.Fprintf(outs[1], "bashcall: sandbox runner failure: %s\n", out.RunnerFailure)
		final.Sandbox.RunnerFailed = true
		final.Note = "the sandbox runner failed"
	default:
		// The marker says a stop was meant, the stop asked of this
		// supervisor that it came: a marker alone is a bash_kill that
		// ended before its signal. A task not stopped by a kill has its
		// notice due, whatever a kill holds of it.
		_, killErr := os.Lstat(filepath.Join(t.dir, "kill"))
		stopped := killErr == nil && stops.asked.Load()
		final.noticeDue = !stopped
		final.Signal = signalName(out.Signal)
		if out.Signal == 0 {
			final.ExitCode = out.ExitCode
			if !stopped {
				final.State = stateCompleted
			}
		}
		code := &final.ExitCode
		if out.Signal != 0 {
			code = nil
		}
		final.Sandbox.classify(code, string(outs[1].tailBytes()))
	}
	return final, nil
}
