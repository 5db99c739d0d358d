package main

// bashcall serve: calls dropped as files into a spool directory, answered
// at most once (PROTOCOL.md section 8).
//
//	DIR/tmp/  a client writes NAME.json here first
//	DIR/new/  then renames it here
//	DIR/cur/  a worker claims a call by renaming it here
//	DIR/out/  the response, NAME.json, appears here by a rename
//
// A worker opens a call and takes an flock on it before renaming it into
// cur/, and holds the lock until the response exists and the claim is
// removed. So a call in cur/ that nobody locks was claimed by a process
// that died: it is answered as interrupted and never run again. Each call
// runs in its own bashcall process, which is the subreaper of its command
// and dies (aborting the command) if serve dies. How responses reach out/
// is in spoolanswer.go; the checks of the directory in spooldir.go.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// spool is one serving process.
type spool struct {
	dir      string
	inv      *invocation
	cfgPath  string
	workers  int
	stderr   io.Writer
	mu       sync.Mutex
	inflight map[string]bool
	children map[*os.Process]bool
	pool     *warmPool // bashcall processes started ahead of their calls
	stopping bool
	wg       sync.WaitGroup
	pending  sync.WaitGroup // responses waiting to be written
	giveUp   chan struct{}  // closed when serve stops waiting for them
}

// runServe answers calls dropped into -spool DIR until SIGINT or SIGTERM,
// or, with -once, until what was waiting is answered.
func runServe(args, environ []string, stdout, stderr io.Writer) error {
	var c commonFlags
	fs := newFlagSet("serve", stderr, &c)
	dirFlag := fs.String("spool", "", "answer calls dropped into `DIR`")
	workersFlag := fs.Int("workers", 0, "answer `N` calls at once (default: [spool] workers)")
	onceFlag := fs.Bool("once", false, "answer what is waiting, then exit")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *dirFlag == "" {
		return usageError{errors.New("serve: -spool DIR is required")}
	}
	inv, err := loadSettings(&c, environ, true)
	if err != nil {
		return err
	}
	s := &spool{inv: inv, cfgPath: inv.cfg.path, workers: int(inv.cfg.Spool.Workers), stderr: stderr,
		inflight: map[string]bool{}, children: map[*os.Process]bool{}, giveUp: make(chan struct{})}
	if *workersFlag < 0 || *workersFlag > 1024 {
		return usageError{fmt.Errorf("serve: -workers must be between 1 and 1024, got %d", *workersFlag)}
	}
	if *workersFlag > 0 {
		s.workers = *workersFlag
	}
	if s.dir, err = prepareSpool(*dirFlag); err != nil {
		return err
	}
	if err := inv.listSpool(s.dir); err != nil {
		return err
	}
	// One child waits: a call that comes alone does not wait for a Go
	// start; the calls of a burst start theirs as they come.
	warm := 1
	if *onceFlag {
		warm = 0 // no call after these: none to start ahead
	}
	s.pool = newWarmPool(warm, s.startChild)
	defer s.inv.stopDeadCalls() // the records of the waiting children it stopped
	defer s.pool.close()
	s.pool.refill()
	return s.serve(*onceFlag)
}

// serve is the dispatch loop: rescan on every wake-up, until stopped.
func (s *spool) serve(once bool) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	queue := make(chan string)
	for i := 0; i < s.workers; i++ {
		go s.worker(queue)
	}
	w := newWatcher(filepath.Join(s.dir, "new"), 0, 0)
	defer w.close()
	stopped := make(chan struct{})
	go func() {
		<-sigs
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		close(stopped)
		w.interrupt()
		s.finish(sigs)
	}()
	fmt.Fprintf(s.stderr, "bashcall serve: answering calls in %s with %d workers\n", s.dir, s.workers)
	for {
		s.recoverInterrupted()
		names := s.waiting()
		s.dispatch(queue, names, stopped)
		if once {
			s.wg.Wait()
		}
		select {
		case <-stopped:
			s.wg.Wait()
			s.settle()
			return nil
		default:
		}
		if once {
			if len(names) == 0 {
				s.settle()
				return nil
			}
			continue
		}
		// New calls wake the watcher at once; the periodic rescan only
		// finds claims left by a serve process that died meanwhile.
		w.wait(time.Minute)
	}
}

// dispatch hands names to the workers; once stopped, the rest are let go.
func (s *spool) dispatch(queue chan<- string, names []string, stopped <-chan struct{}) {
	for i, name := range names {
		select {
		case queue <- name:
		case <-stopped:
			s.mu.Lock()
			for _, n := range names[i:] {
				delete(s.inflight, n)
				s.wg.Done()
			}
			s.mu.Unlock()
			return
		}
	}
}

// waiting lists the calls in new/ that no worker is on yet, marking them.
func (s *spool) waiting() []string {
	d, err := os.Open(filepath.Join(s.dir, "new"))
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range names {
		if !s.inflight[n] {
			s.inflight[n] = true
			s.wg.Add(1)
			out = append(out, n)
		}
	}
	return out
}

// finish runs after the first SIGINT/SIGTERM: calls in flight get grace_ms
// to finish, then are aborted; a second signal aborts them at once.
func (s *spool) finish(sigs <-chan os.Signal) {
	select {
	case <-time.After(s.inv.grace()):
	case <-sigs:
	}
	s.mu.Lock()
	for p := range s.children {
		p.Signal(syscall.SIGTERM)
	}
	s.mu.Unlock()
}

// worker answers the calls it is handed.
func (s *spool) worker(queue <-chan string) {
	for name := range queue {
		s.mu.Lock()
		stopping := s.stopping
		s.mu.Unlock()
		if !stopping {
			s.claim(name)
		}
		s.mu.Lock()
		delete(s.inflight, name)
		s.mu.Unlock()
		s.wg.Done()
	}
}

// claim takes new/NAME (lock, then rename into cur/), runs it and has it
// answered.
func (s *spool) claim(name string) {
	f, claimed := s.take(name)
	if f == nil {
		return
	}
	s.deliver(name, claimed, f, s.answer(f))
	// The next call's process starts once this call is answered, not
	// while its answer is being written: the two would share the cores.
	s.pool.refill()
}

// take opens and locks new/NAME and renames it into cur/, returning the
// locked file and its new path; nil when the call is not this worker's
// to run.
func (s *spool) take(name string) (*os.File, string) {
	src := filepath.Join(s.dir, "new", name)
	resp, ok := responseName(name)
	if !ok {
		s.moveAside(name, src, "no response name can be derived from it")
		return nil, ""
	}
	f, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.reject(name, src, "the call cannot be opened: "+describeOpenError(err))
		}
		return nil, ""
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return nil, "" // another worker is claiming it
	}
	// The claim takes the response's name, so that of two calls with one
	// response (NAME and NAME.json) only one runs.
	claimed := filepath.Join(s.dir, "cur", resp)
	fi, err := f.Stat()
	switch {
	case err != nil || !isStill(src, fi):
		// taken (and maybe answered) by another worker meanwhile
	case !fi.Mode().IsRegular():
		s.reject(name, src, "the call is not a regular file")
	case s.answered(resp):
		// Its answer could not be delivered: the call is not run.
		s.moveAside(name, src, "out/ already holds a response named "+resp+"; the call was not run")
	default:
		err := renameNoReplace(src, claimed)
		if errors.Is(err, errors.ErrUnsupported) {
			err = os.Rename(src, claimed) // a collision is then caught as its response is written
		}
		if err == nil {
			return f, claimed
		}
		if errors.Is(err, os.ErrExist) {
			s.moveAside(name, src, "another call with the same response name "+resp+" is being run; this one was not run")
		}
	}
	f.Close()
	return nil, ""
}

// answered reports whether out/ holds the response named resp.
func (s *spool) answered(resp string) bool {
	_, err := os.Lstat(filepath.Join(s.dir, "out", resp))
	return err == nil
}

// answer runs the call in its own bashcall process and returns the
// response line.
func (s *spool) answer(f *os.File) []byte {
	data, err := io.ReadAll(io.LimitReader(f, maxRequestBytes+1))
	if err != nil {
		return errorLine(nil, &invalidRequest{why: "reading the call: " + err.Error()})
	}
	c, err := s.pool.take()
	if err != nil {
		if rerr := reexecCheck(); rerr != nil {
			err = rerr
		}
		return errorLine(nil, fmt.Errorf("starting bashcall: %w", err))
	}
	s.mu.Lock()
	s.children[c.cmd.Process] = true
	s.mu.Unlock()
	line, ok := c.ask(data)
	s.mu.Lock()
	delete(s.children, c.cmd.Process)
	s.mu.Unlock()
	if ok {
		return line
	}
	return errorLine(requestID(data), fmt.Errorf("bashcall failed (%v): %s", c.waitErr, strings.TrimSpace(c.errText.String())))
}

// startChild starts the bashcall process of one call, which waits for
// its request.
func (s *spool) startChild(warm bool) (*warmChild, error) {
	args := []string{"-state-dir", s.inv.stateDir, "-launched-as", s.inv.launchName()}
	if warm {
		args = append(args, "-warm")
	}
	if s.cfgPath != "" {
		args = append(args, "-config", s.cfgPath)
	}
	return startChild(args, append(slices.Clip(s.inv.environ), "BASHCALL_SPOOL_DIR="+s.dir), nil, nil)
}

// responseName is NAME.json for NAME or NAME.json.
func responseName(name string) (string, bool) {
	if !strings.HasSuffix(name, ".json") {
		name += ".json"
	}
	return name, len(name) <= 200 && !strings.HasPrefix(name, ".")
}

// reject answers an entry that is not a readable regular file, moving it
// aside to rejected/ so that it is not seen again.
func (s *spool) reject(name, path, why string) {
	if err := s.respond(name, errorLine(nil, &invalidRequest{why: why})); err != nil {
		fmt.Fprintf(s.stderr, "bashcall serve: %s: %s; %v\n", name, why, err)
	}
	s.moveAside(name, path, why)
}

// moveAside moves an entry to rejected/ and logs why.
func (s *spool) moveAside(name, path, why string) {
	fmt.Fprintf(s.stderr, "bashcall serve: %q: %s; moved to rejected/\n", name, why)
	aside, err := privateDir(s.dir, "rejected")
	if err == nil {
		err = os.Rename(path, filepath.Join(aside, asideName(name)))
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "bashcall serve: %s: cannot move it aside: %v\n", name, err)
	}
}

// asideName is the name in rejected/ of entry name: the name and the
// time, a long name cut short and told apart by its hash, so that the
// whole stays within the 255 bytes of a file name.
func asideName(name string) string {
	if len(name) > 200 {
		sum := sha256.Sum256([]byte(name))
		name = name[:180] + "-" + hex.EncodeToString(sum[:8])
	}
	return fmt.Sprintf("%s.%d", name, time.Now().UnixNano())
}

// errorLine is a response line for err, echoing id when known.
func errorLine(id []byte, err error) []byte {
	resp := &response{ID: id}
	setError(resp, err)
	var b strings.Builder
	encodeResponse(&b, resp)
	return []byte(b.String())
}

// requestID extracts the id of a call, if it has a usable one.
func requestID(data []byte) []byte {
	if req, err := parseRequest(data); err == nil {
		return req.ID
	}
	return nil
}

// describeOpenError words why a spool entry cannot be opened.
func describeOpenError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		if pe.Err == syscall.ELOOP {
			return "it is a symbolic link"
		}
		return pe.Err.Error()
	}
	return err.Error()
}
