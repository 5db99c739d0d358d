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
	"syscall"
	"time"
)

// supervisorArg is the hidden first argument that selects the supervisor.
const supervisorArg = "__supervise"

// taskSpec is what the starter hands the supervisor through a pipe, so
// that the command's environment never touches the disk.
type taskSpec struct {
	Argv     []string     `json:"argv"`
	Dir      string       `json:"dir"`
	Env      []string     `json:"env"`
	Launcher bool         `json:"launcher"`
	NS       nsKind       `json:"ns,omitempty"`
	Guard    *gitGuard    `json:"guard,omitempty"`
	// Plan and Command let the supervisor re-plan without a namespace
	// when the kernel refuses one (see forkLauncher).
	Plan    *sandboxPlan `json:"plan,omitempty"`
	Command []string     `json:"command,omitempty"`
	Sandbox  sandboxFacts `json:"sandbox"`
}

// backgroundResult is the structuredContent of a background start.
type backgroundResult struct {
	Kind   string `json:"kind"`
	TaskID string `json:"taskId"`
}

// startTask starts the planned call as a background task.
func (inv *invocation) startTask(p *callPlan, a *bashArgs, owner string, resp *response) error {
	me := procRecord{PID: os.Getpid(), BootID: bootID()}
	me.Start, _ = procStartTime(me.PID)
	t, err := inv.allocateTask(&taskMeta{Owner: owner, Command: a.Command, Workdir: p.workdir,
		Mode: p.sandbox.Mode, StartedAt: time.Now().UnixMilli(), GraceMs: inv.cfg.GraceMs,
		MaxOutputBytes: inv.cfg.MaxOutputBytes, MaxSpillBytes: inv.cfg.MaxSpillBytes, Starter: me,
		MaxSpillTotalBytes: inv.cfg.MaxSpillTotalBytes})
	if err != nil {
		return err
	}
	spec := &taskSpec{Argv: p.argv, Dir: p.workdir, Env: p.env, Launcher: p.sandbox.confined(), NS: p.sandbox.NS,
		Guard: p.sandbox.Guard, Plan: p.sandbox, Command: p.command, Sandbox: p.sandbox.Facts}
	if err := inv.spawnSupervisor(t, spec); err != nil {
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
	logFile, err := os.OpenFile(filepath.Join(t.dir, "supervisor.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
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
	// A failed write is the supervisor's death, which it explains.
	json.NewEncoder(specW).Encode(spec)
	specW.Close()
	line, _ := bufio.NewReader(io.LimitReader(readyR, 64)).ReadString('\n')
	if line != "ok\n" {
		return t.supervisorDeath(pid)
	}
	return t.notStarted()
}

// runSupervisor is bashcall re-executed as "__supervise STATEDIR ID", with
// the task's spec on stdin and its ready pipe on stdout.
func runSupervisor(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 2 {
		return usageError{errors.New("supervisor usage: __supervise STATEDIR ID")}
	}
	// Catch bash_kill's SIGTERM from the first moment the supervisor is on
	// record: one arriving before the command starts stops it at once.
	abort := make(chan os.Signal, 2)
	signal.Notify(abort, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	inv := &invocation{stateDir: args[0]}
	t, err := inv.loadTask(args[1])
	if err != nil {
		return fmt.Errorf("loading task %q: %w", args[1], err)
	}
	me := procRecord{PID: os.Getpid(), BootID: bootID()}
	me.Start, _ = procStartTime(me.PID)
	if err := writeJSON(filepath.Join(t.dir, "supervisor.json"), &me); err != nil {
		return err
	}
	var spec taskSpec
	if err := json.NewDecoder(io.LimitReader(stdin, 16<<20)).Decode(&spec); err != nil {
		return fmt.Errorf("reading the task spec: %w", err)
	}
	if len(spec.Argv) == 0 {
		return errors.New("the task spec names no command")
	}
	ready := func() {
		if stdout != nil {
			io.WriteString(stdout, "ok\n")
			if c, ok := stdout.(io.Closer); ok {
				c.Close()
			}
			stdout = nil
		}
	}
	defer ready()
	final, err := t.supervise(&spec, ready, abort)
	if err != nil {
		return err
	}
	return t.record(final)
}

// supervise runs the command and returns its final status.
func (t *task) supervise(spec *taskSpec, ready func(), abort <-chan os.Signal) (*taskFinal, error) {
	outs, err := openTaskStreams(t)
	if err != nil {
		return nil, err
	}
	defer outs[0].close()
	defer outs[1].close()
	if err := setSubreaper(); err != nil {
		return nil, err
	}
	out, err := runCommand(&runSpec{
		Argv: spec.Argv, Dir: spec.Dir, Env: spec.Env, Stdout: outs[0], Stderr: outs[1],
		Grace: time.Duration(t.meta.GraceMs) * time.Millisecond, Abort: abort,
		Launcher: spec.Launcher, NS: spec.NS, Subreaper: true,
		WithoutNS: func() ([]string, error) {
			if spec.Plan == nil {
				return nil, errors.New("no plan to start the task without a namespace")
			}
			argv, err := spec.Plan.withoutNamespace(spec.Command)
			spec.Guard = spec.Plan.Guard
			return argv, err
		},
		Started: func(pid int) {
			rec := procRecord{PID: pid, BootID: bootID()}
			rec.Start, _ = procStartTime(pid)
			writeJSON(filepath.Join(t.dir, "command.json"), &rec)
			ready()
		},
	})
	final := &taskFinal{State: stateKilled, FinishedAt: time.Now().UnixMilli(), Sandbox: &spec.Sandbox}
	final.Sandbox.restored(spec.Guard.restore())
	switch {
	case err != nil:
		fmt.Fprintf(outs[1], "bashcall: %v\n", startError(err))
		final.Note = noteNotStarted
	case out.RunnerFailure != "":
		fmt.Fprintf(outs[1], "bashcall: sandbox runner failure: %s\n", out.RunnerFailure)
		final.Sandbox.RunnerFailed = true
		final.Note = "the sandbox runner failed"
	default:
		_, killErr := os.Lstat(filepath.Join(t.dir, "kill"))
		final.Signal = signalName(out.Signal)
		if out.Signal == 0 {
			final.ExitCode = out.ExitCode
			if killErr != nil {
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
