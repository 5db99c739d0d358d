package main

// Starting, supervising, timing out and reaping one command, and the
// shell it runs in.
//
// The command is the leader of a new session, so of its own process group,
// with stdin /dev/null and no controlling terminal. Stopping it is a ladder:
// SIGTERM to the group, then, grace later, SIGKILL to the group and to every
// descendant, including those that left the group (setsid, double fork):
// a process that runs commands is a child subreaper, so those are adopted
// by it and found in /proc. After the leader exits, output pipes still held
// by descendants get at most grace to close; whatever is left of the tree
// is then killed, so a finished call leaves nothing running.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runSpec is one command to run to completion.
type runSpec struct {
	Argv    []string // Argv[0] is an absolute path
	Dir     string
	Env     []string
	Stdout  io.Writer // must not block for long
	Stderr  io.Writer
	Timeout time.Duration // 0: none
	Grace   time.Duration
	// Abort delivers stop requests: the first runs the ladder, a second
	// kills at once.
	Abort <-chan os.Signal
	// Launcher says Argv goes through the sandbox launcher, whose status
	// pipe becomes descriptor 3.
	Launcher bool
	// NS is the launcher's private namespace, if any.
	NS nsKind
	// GoLauncher runs bashcall itself as the launcher even where the
	// native one (nativelauncher_linux.go) could run.
	GoLauncher bool
	// WithoutNS re-plans the call without a namespace (snapshots instead)
	// when creating one is refused; nil: fail.
	WithoutNS func() ([]string, error)
	// Subreaper says this process is a subreaper that runs only this
	// command, so every descendant of it belongs to the command.
	Subreaper bool
	// Forked, when set, runs once the command's process exists, before
	// the wait: what a call needs only while its command runs is paid
	// there, while the command starts on the other CPU.
	Forked func()
	// Started, when set, learns the leader's pid once the command runs.
	Started func(pid int)
	// FreezeLeader makes the leader stop, not die, when this process dies,
	// to keep its session id for the cleanup. Only for a process whose own
	// descriptors nobody waits on: a leader frozen before its exec holds
	// them all.
	FreezeLeader bool
	// Track, when set, records the command's tree (leftovers.go) before
	// the command exists, and again once its leader does. An error the
	// first time keeps the command from starting.
	Track func(tree *treeRecord) error
}

// runOutcome is how a command ended.
type runOutcome struct {
	ExitCode      int // meaningful when Signal == 0
	Signal        syscall.Signal
	TimedOut      bool
	Aborted       bool
	RunnerFailure string // the launcher could not confine the command
}

// errStart marks a command that could not be started at all.
type errStart struct{ err error }

func (e *errStart) Error() string { return e.err.Error() }
func (e *errStart) Unwrap() error { return e.err }

// runCommand runs spec and returns once the command and every process it
// left behind are gone and its output is collected.
func runCommand(spec *runSpec) (*runOutcome, error) {
	var parentEnds, childEnds []*os.File
	defer func() {
		for _, f := range append(parentEnds, childEnds...) {
			f.Close()
		}
	}()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	childEnds = append(childEnds, devnull)
	pipes := 2
	if spec.Launcher {
		pipes = 3 // the launcher's status pipe becomes descriptor 3
	}
	for i := 0; i < pipes; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		parentEnds, childEnds = append(parentEnds, r), append(childEnds, w)
	}
	growPipe(parentEnds[0])
	growPipe(parentEnds[1])
	fds := make([]uintptr, len(childEnds))
	for i, f := range childEnds {
		fds[i] = f.Fd()
	}
	var tree *treeRecord
	if spec.Track != nil {
		tree = newTreeRecord(childEnds[1:])
		if err := spec.Track(tree); err != nil {
			return nil, &errStart{err}
		}
	}
	pid, err := forkLauncher(spec, fds)
	for _, f := range childEnds {
		f.Close()
	}
	childEnds = nil
	if err != nil {
		if rerr := reexecCheck(); spec.Launcher && rerr != nil {
			err = rerr // not the command: bashcall itself is out of reach
		}
		return nil, &errStart{err}
	}
	if tree != nil {
		tree.PID = pid
		tree.Start, _ = procStartTime(pid)
		spec.Track(tree)
	}
	if spec.Forked != nil {
		spec.Forked()
	}
	r := &execution{spec: spec, pid: pid, outDone: pump(parentEnds[0], spec.Stdout), errDone: pump(parentEnds[1], spec.Stderr)}
	var status launcherStatus
	if spec.Launcher {
		// EOF comes when the launcher execs the shell, or writes why not.
		status = readLauncherStatus(parentEnds[2])
	}
	if status.failure == "" && status.execErr == nil && spec.Started != nil {
		spec.Started(pid)
	}
	out := r.supervise()
	parentEnds[0].Close()
	parentEnds[1].Close()
	<-r.outDone
	<-r.errDone
	if status.execErr != nil {
		return nil, &errStart{status.execErr}
	}
	out.RunnerFailure = status.failure
	return out, nil
}

// minProcesses is the limit on the user's processes (RLIMIT_NPROC, which
// counts threads) below which bashcall does not start: the Go runtime
// ends a process that cannot start a thread with a fatal error (exit 2,
// nothing on stdout), and a call needs about eight threads of its own, a
// background start as many again for its supervisor, and the command its
// processes.
const minProcesses = 32

// pump copies r into w until EOF or until r is closed.
func pump(r *os.File, w io.Writer) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 256<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				w.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return done
}

// execution is the state of one supervised command.
type execution struct {
	spec             *runSpec
	pid              int
	outDone, errDone <-chan struct{}
	killAt           <-chan time.Time // the SIGKILL step of the ladder
	stopping         bool
	reaped           bool // the leader's pid may since belong to another process
}

// supervise waits for the leader, runs the ladder on timeout or abort,
// bounds the drain of the pipes and clears what is left of the tree.
func (r *execution) supervise() *runOutcome {
	out := &runOutcome{}
	exited := make(chan syscall.WaitStatus, 1)
	go func() { exited <- waitChild(r.pid) }()
	var timeout <-chan time.Time
	if r.spec.Timeout > 0 {
		t := time.NewTimer(r.spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var ws syscall.WaitStatus
	for !r.reaped {
		select {
		case ws = <-exited:
			r.reaped = true
		case <-timeout:
			out.TimedOut = true
			r.stop()
		case <-r.spec.Abort:
			out.Aborted = out.Aborted || !out.TimedOut
			r.abort()
		case <-r.killAt:
			r.kill()
		}
	}
	switch {
	case ws.Signaled():
		out.Signal = ws.Signal()
	case ws.Exited():
		out.ExitCode = ws.ExitStatus()
	}
	r.drain()
	if r.spec.Subreaper {
		reapOrphans(r.spec.Grace) // finds nothing to kill in the common case
	} else {
		r.kill()
	}
	return out
}

// stop starts the ladder: SIGTERM to the group now, SIGKILL after grace.
func (r *execution) stop() {
	if r.stopping {
		return
	}
	r.stopping = true
	syscall.Kill(-r.pid, syscall.SIGTERM)
	// A stopped process acts on SIGTERM only once continued: without this
	// a command that stopped itself would get no chance to clean up
	// before the SIGKILL (timeout(1) continues the group too).
	syscall.Kill(-r.pid, syscall.SIGCONT)
	r.killAt = time.After(r.spec.Grace)
}

// abort is stop the first time and kill after that.
func (r *execution) abort() {
	if r.stopping {
		r.kill()
		return
	}
	r.stop()
}

// drain waits for both pipes to reach EOF, at most grace after the leader
// exited; the ladder and further aborts go on meanwhile.
func (r *execution) drain() {
	deadline := time.NewTimer(r.spec.Grace)
	defer deadline.Stop()
	outDone, errDone := r.outDone, r.errDone
	for outDone != nil || errDone != nil {
		select {
		case <-outDone:
			outDone = nil
		case <-errDone:
			errDone = nil
		case <-r.killAt:
			r.kill()
		case <-r.spec.Abort:
			r.kill()
		case <-deadline.C:
			return
		}
	}
}

// kill sends SIGKILL to the group and to every descendant that escaped it.
// Once the leader is reaped its pid could be reused, so the group is then
// reached only through the tree, whose members are checked one by one.
func (r *execution) kill() {
	r.killAt = nil
	if !r.reaped || !r.spec.Subreaper {
		syscall.Kill(-r.pid, syscall.SIGKILL)
	}
	if r.spec.Subreaper {
		killTree(os.Getpid())
	} else if !r.reaped {
		killTree(r.pid)
	}
}

// killTree sends SIGKILL to every live descendant of root.
func killTree(root int) {
	for pid, start := range descendants(scanProcs(), root) {
		signalProcess(pid, start, syscall.SIGKILL)
	}
}

// reapOrphans reaps every child this subreaper has, killing the live ones,
// for at most bound. wait4 answering ECHILD means no descendant is left:
// every survivor of a dead parent is re-parented here.
func reapOrphans(bound time.Duration) {
	deadline := time.Now().Add(bound)
	for {
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if err == syscall.ECHILD {
				return
			}
			if pid <= 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			return
		}
		killTree(os.Getpid())
		time.Sleep(time.Millisecond)
	}
}

// lookShell resolves the configured shell to an absolute path.
func lookShell(shell, path string) (string, error) {
	if strings.Contains(shell, "/") {
		p, err := filepath.Abs(shell)
		if err == nil {
			_, err = os.Stat(p)
		}
		if err != nil {
			return "", toolErrorf("the configured shell %q cannot be used: %v", shell, err)
		}
		return p, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue // "" and "." would find a shell a command planted in the workdir
		}
		p := filepath.Join(dir, shell)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return filepath.Abs(p)
		}
	}
	return "", toolErrorf("the configured shell %q is not on PATH", shell)
}

// signalName is "SIGTERM" for SIGTERM, "" for no signal.
func signalName(sig unix.Signal) string {
	if sig == 0 {
		return ""
	}
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return fmt.Sprintf("SIG%d", int(sig))
}
