package main

// Warm children for the long-lived servers (serve, mcp). Each call a
// server answers runs in a bashcall process of its own, which owns the
// call's process tree (subreaper, kill ladder) and whose crash loses that
// call alone. Starting that process costs a Go start. A warm child is
// started ahead of its call (after the server's previous call is
// answered, while it waits for the next) and blocks reading its request,
// so that the call does not wait for the start. It is the process a cold
// start would give, with the same arguments and environment; it reads its
// request before it loads the config (runCall), so that an edit of the
// config made after its start holds for its call. An idle child has
// started nothing: the server kills it when it stops.
//
// A child started ahead (-warm) also runs, while it waits, what every call
// runs first and what costs most the first time in a process: JSON and
// TOML decoding, rendering and encoding a response, the host probe and
// the native launcher's memfd (warmUp). Its signals are caught from its
// start, as every call's are (signals.go).

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"
)

// warmChild is a bashcall process waiting for its request on stdin.
type warmChild struct {
	cmd      *exec.Cmd
	stdin    *os.File      // the write end of its stdin
	stdout   bytes.Buffer  // its response, once answered is closed
	answered chan struct{} // closed at the end of its stdout
	stderr   limitedWriter
	errText  bytes.Buffer
	exited   chan struct{} // closed once it exited and its output is in
	waitErr  error
	start    uint64 // its start time, to tell it from a reused pid
}

// startChild starts bashcall with args and environ, its stderr to errOut
// (and a bounded copy kept), and extra descriptors from 3 on.
func startChild(args, environ []string, errOut io.Writer, extra []*os.File) (*warmChild, error) {
	c := &warmChild{cmd: exec.Command(selfExe(), args...), exited: make(chan struct{}), answered: make(chan struct{})}
	c.stderr = limitedWriter{w: &c.errText, n: 4096}
	c.cmd.Args[0] = "bashcall"
	c.cmd.Env = environ
	c.cmd.SysProcAttr = serveChildSysProcAttr()
	c.cmd.Stderr = &c.stderr
	if errOut != nil {
		c.cmd.Stderr = io.MultiWriter(errOut, &c.stderr)
	}
	c.cmd.ExtraFiles = extra
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	out, outW, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	c.cmd.Stdin, c.stdin = r, w
	c.cmd.Stdout = outW
	err = c.cmd.Start()
	r.Close()
	outW.Close()
	if err != nil {
		w.Close()
		out.Close()
		return nil, err
	}
	c.start, _ = procStartTime(c.cmd.Process.Pid)
	go func() {
		c.stdout.ReadFrom(out)
		out.Close()
		close(c.answered)
	}()
	go func() {
		c.waitErr = c.cmd.Wait()
		<-c.answered
		close(c.exited)
	}()
	return c, nil
}

// ask hands the child its request and returns its response: what it
// wrote to stdout, complete once the child lets go of its stdout, which it
// does as soon as its response is written and whatever the response held
// is released (releaseStdout), before its exit. ok says whether that is a
// response line; if not, ask waits for the child's exit, and its waitErr
// and errText say what became of it.
func (c *warmChild) ask(request []byte) (line []byte, ok bool) {
	c.stdin.Write(request) // a child that died early shows in its exit
	c.stdin.Close()
	<-c.answered
	line = c.stdout.Bytes()
	if bytes.HasPrefix(line, []byte("{")) && bytes.HasSuffix(line, []byte("}\n")) {
		return line, true
	}
	<-c.exited
	return line, false
}

// alive reports whether the child still waits: not reaped, and not dead
// waiting to be (a child killed a moment ago is a zombie before Wait sees
// it). Its stdin says nothing sooner: the read end stays open until the
// last of a killed child's threads is gone, milliseconds after its main
// thread is a zombie.
func (c *warmChild) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return processAlive(c.cmd.Process.Pid, c.start)
	}
}

// discard stops a child that never got a request.
func (c *warmChild) discard() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.stdin.Close()
	<-c.exited
}

// warmPool keeps up to want children started ahead of their calls.
type warmPool struct {
	start func(warm bool) (*warmChild, error) // warm: started ahead of its call
	want  int

	mu       sync.Mutex
	idle     []*warmChild
	spawning sync.WaitGroup
	pending  int
	closed   bool
}

// newWarmPool keeps want children from start waiting.
func newWarmPool(want int, start func(warm bool) (*warmChild, error)) *warmPool {
	return &warmPool{start: start, want: want}
}

// take returns a waiting child: a warm one, else one started now. It does
// not wait for one being started: under a burst of calls, that one is for
// a later call, and the calls of the burst start as they would without
// the pool. (Waiting for it measured no faster for a client that sends
// its next call the moment it has an answer.)
func (p *warmPool) take() (*warmChild, error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		c := p.idle[0]
		p.idle = p.idle[1:]
		if c.alive() {
			p.mu.Unlock()
			return c, nil
		}
		go c.discard()
	}
	p.mu.Unlock()
	return p.start(false)
}

// refill starts children in the background until want of them wait.
func (p *warmPool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ; !p.closed && len(p.idle)+p.pending < p.want; p.pending++ {
		p.spawning.Add(1)
		go func() {
			defer p.spawning.Done()
			c, err := p.start(true)
			p.mu.Lock()
			p.pending--
			keep := err == nil && !p.closed
			if keep {
				p.idle = append(p.idle, c)
			}
			p.mu.Unlock()
			if err == nil && !keep {
				c.discard()
			}
		}()
	}
}

// close stops every waiting child and starts no more.
func (p *warmPool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.discard()
	}
	p.spawning.Wait()
}

// requestWaiting reports whether the request is already there to be read:
// a child whose call came while it started has no time to warm up, which
// would only delay the call. A reader that is not a descriptor counts as
// ready.
func requestWaiting(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return true
	}
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err != nil || n > 0
}

// warmConfig and warmRequest are what warmUp decodes: a config of every
// section and a bash call.
const (
	warmConfig = "shell = \"bash\"\ntimeout_ms = 120000\n[background]\nenabled = true\nretention = \"24h\"\n" +
		"[sandbox]\nmode = \"workspace-write\"\nwritable_roots = []\ndeny_read = [\"~/.ssh\"]\n" +
		"[approval]\npolicy = \"ask\"\ncommand = []\n[env]\nkeep = []\nset = {}\n[spool]\nworkers = 4\n"
	warmRequest = `{"name":"bash","arguments":{"command":"true","description":"warm","timeoutMs":1000},"session":{"id":"warm","cwd":"/"}}`
	warmPin     = `{"given":"/","path":"/","dev":1,"ino":2}`
)

// warmUp runs, in a child waiting for its call, what each call runs first,
// on values of its own, so that the call does not pay for the process's
// first time through it. It changes nothing a call can see: its results
// are dropped, but for the config file's decoding, which the call uses
// only if the file's bytes are the same once its request is in, and the
// call record, made in the state dir the settings name now (stateFlag is
// -state-dir), which the call uses if they name the same one then, and
// the read rules of a confined call's ruleset, which it uses if it plans
// the same ones (rulesahead_linux.go).
func warmUp(getenv func(string) string, configFile, stateFlag string) {
	// A call's process runs one call, one step at a time: with a single
	// P the runtime does not wake a second thread each time a goroutine
	// (a pipe's pump, the wait for the command) becomes runnable, which
	// in a VM is a cross-CPU wakeup each time. Set here, ahead of the
	// call, its stop of the world costs the call nothing.
	runtime.GOMAXPROCS(1)
	cfg := defaultConfig()
	if _, err := toml.Decode(warmConfig, &cfg); err == nil {
		cfg.validate()
	}
	sup := sandboxSupport(getenv)
	native := sup.ABIErr == nil && getenv("BASHCALL_LAUNCHER") != "go"
	if native {
		warmNativeLauncher()
	}
	// The config file, decoded now, is used if it still holds the same
	// bytes when the call comes.
	if cfg, err := preloadConfig(configFile); err == nil {
		if dir, err := stateDirPath(stateFlag, &cfg, getenv); err == nil {
			prepareCall(dir)
			if native && cfg.Sandbox.Mode != modeFullAccess {
				state := canonicalPrefix(dir)
				if others, err := ownDirs(getenv, state); err == nil {
					prepareReadRules(callGrant(cfg.Sandbox.DenyRead, getenv, state, others), cfg.Sandbox.Network == "off")
				}
			}
		}
	}
	if req, err := parseRequest([]byte(warmRequest)); err == nil {
		parseBashArgs(req.Args)
	}
	json.Unmarshal([]byte(warmPin), new(workspacePin)) // a session's call reads its pin
	exit := 0
	r := &foregroundResult{Kind: "foreground", ExitCode: &exit, Sandbox: &sandboxFacts{}}
	resp := &response{Present: &presentation{}, StructuredContent: r}
	setText(resp, renderForeground(r, true), terminalCard(r, true))
	writeResponse(io.Discard, resp, false)
}
