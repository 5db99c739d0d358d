package main

// The state dir's cap on complete copies of output (max_spill_total_bytes).
//
// What counts: every spill file of a foreground call (spill/*) and every
// complete copy of a background task (tasks/bash-N/{stdout,stderr}.log),
// together: both are full outputs a model was or may be given a path to,
// and both would otherwise fill the disk one call or one task at a time.
//
// Liveness: a writer holds a shared flock on its open copy for as long as
// the copy may still be written or offered: a foreground call until its
// response is written (or its process ends), a task's supervisor until it
// exits. Eviction and gc delete a copy only when an exclusive flock on it
// can be had without waiting, which works across processes and dies with
// them. A task's copy also counts as live until its task has settled
// (status.json), so that one just created is never taken for finished.
//
// Accounting: a writer grows its copy in grants of at most one step beyond
// what it has written, each decided under the state dir's spill.lock. A
// grant fits when the finished copies, every other live copy plus one
// step (all its own grant can still add) and the new grant stay within the
// cap, so the total never exceeds it whatever other processes write
// meanwhile. When a grant does not fit, finished copies are deleted,
// oldest (last written) first; when even deleting all of them would not
// make room, nothing is deleted and the writer gives its copy up, which
// the text reports as (unavailable).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// spillLockWait bounds the wait for spill.lock: a process that holds it
// forever costs a complete copy, never a hung call.
const spillLockWait = 5 * time.Second

// spillCap is the cap of one state dir.
type spillCap struct {
	stateDir string
	limit    int64
}

// taskSpillCap is the cap a task's supervisor writes its copies under; a
// task recorded by a bashcall that knew no cap gets the default.
func taskSpillCap(t *task) *spillCap {
	limit := t.meta.MaxSpillTotalBytes
	if limit <= 0 {
		limit = defaultConfig().MaxSpillTotalBytes
	}
	return &spillCap{stateDir: t.stateDir(), limit: limit}
}

// step is the largest grant beyond what a copy holds: small against the
// cap, so that live copies reserve little of it.
func (c *spillCap) step() int64 {
	return min(1<<20, max(4096, c.limit/64))
}

// lock takes spill.lock, retrying without blocking until spillLockWait
// passes. A read-only open suffices for flock, so that gc can still run
// (and report what it cannot delete) on a read-only state dir.
func (c *spillCap) lock() (func(), error) {
	p := filepath.Join(c.stateDir, "spill.lock")
	f, err := openOwn(p, os.O_RDONLY|os.O_CREATE)
	if err != nil {
		return nil, fmt.Errorf("locking spill files: %w", err)
	}
	if err := flockRetry(f, syscall.LOCK_EX, spillLockWait); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %q: %w", p, err)
	}
	return func() { f.Close() }, nil
}

// spillFile is one complete copy being written, live while open.
type spillFile struct {
	budget  *spillCap
	f       *os.File
	path    string
	written int64
	granted int64 // the size the copy may reach
}

// create makes a new spill file in the state dir's spill directory,
// holding it live from before any other process can see it unlocked.
func (c *spillCap) create(pattern string) (*spillFile, error) {
	dir, err := privateDir(c.stateDir, "spill")
	if err != nil {
		return nil, err
	}
	unlock, err := c.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	f, p, err := createPrivate(dir, pattern)
	if err != nil {
		return nil, err
	}
	return c.adopt(f, p)
}

// adopt makes an open, newly created copy live. Another process may be
// checking it at that moment (a task's copy is created outside
// spill.lock), so the shared lock is retried, for a bounded time.
func (c *spillCap) adopt(f *os.File, p string) (*spillFile, error) {
	if err := flockRetry(f, syscall.LOCK_SH, spillLockWait); err != nil {
		f.Close()
		os.Remove(p)
		return nil, fmt.Errorf("locking %q: %w", p, err)
	}
	return &spillFile{budget: c, f: f, path: p}, nil
}

// flockRetry takes a lock without blocking, retrying until wait passes: a
// holder that is stopped or stuck makes the caller fail, not hang.
func flockRetry(f *os.File, how int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is still locked by another process after %v", f.Name(), wait)
		}
		time.Sleep(delay)
	}
}

// errSpillFull says the cap leaves no room for a copy.
var errSpillFull = errors.New("max_spill_total_bytes leaves no room")

// write appends p, asking for a grant whenever it would pass the last one.
// An error means the copy is incomplete: the caller gives it up.
func (s *spillFile) write(p []byte) error {
	step := s.budget.step()
	for len(p) > 0 {
		n := min(int64(len(p)), step)
		if s.written+n > s.granted {
			g, err := s.budget.grant(s.path, s.written, s.written+n)
			if err != nil {
				return err
			}
			s.granted = g
		}
		m, err := s.f.Write(p[:n])
		s.written += int64(m)
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// release ends the copy's liveness; it may be evicted from then on.
func (s *spillFile) release() {
	if s != nil && s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// remove gives the copy up: deleted while still held, so no other
// process ever sees a partial copy as finished.
func (s *spillFile) remove() {
	os.Remove(s.path)
	s.release()
}

// grant lets the copy at self, holding have bytes, grow to want and, room
// permitting, up to one step past have; it deletes finished copies, oldest
// first, when that is what makes room, and none when even all of them
// would not.
func (c *spillCap) grant(self string, have, want int64) (int64, error) {
	unlock, err := c.lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var live, done int64
	var finished []spillEntry
	for _, e := range c.entries(self) {
		if e.live {
			live += e.size + c.step()
		} else {
			done += e.size
			finished = append(finished, e)
		}
	}
	if live+want > c.limit {
		return 0, errSpillFull
	}
	sort.Slice(finished, func(i, j int) bool { return finished[i].older(finished[j]) })
	for _, e := range finished {
		if live+done+want <= c.limit {
			break
		}
		if os.Remove(e.path) == nil {
			done -= e.size
		}
	}
	if live+done+want > c.limit {
		return 0, errSpillFull
	}
	return min(max(want, have+c.step()), c.limit-live-done), nil
}

// spillEntry is one complete copy found in the state dir.
type spillEntry struct {
	path  string
	size  int64
	mtime time.Time
	live  bool
}

// older orders copies by last write, then by path, so eviction is stable.
func (e spillEntry) older(o spillEntry) bool {
	if !e.mtime.Equal(o.mtime) {
		return e.mtime.Before(o.mtime)
	}
	return e.path < o.path
}

// entries lists the state dir's complete copies other than self.
func (c *spillCap) entries(self string) []spillEntry {
	var out []spillEntry
	add := func(p string, settled bool) {
		if p == self {
			return
		}
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			return
		}
		live := !settled
		if !live {
			var err error
			live, err = copyLive(p)
			if errors.Is(err, os.ErrNotExist) {
				return
			}
			// A copy that cannot be checked counts as live: never deleted.
			live = live || err != nil
		}
		out = append(out, spillEntry{path: p, size: fi.Size(), mtime: fi.ModTime(), live: live})
	}
	spills, _ := os.ReadDir(filepath.Join(c.stateDir, "spill"))
	for _, e := range spills {
		add(filepath.Join(c.stateDir, "spill", e.Name()), true)
	}
	tasks, _ := os.ReadDir(filepath.Join(c.stateDir, "tasks"))
	for _, e := range tasks {
		if !validTaskID(e.Name()) {
			continue
		}
		dir := filepath.Join(c.stateDir, "tasks", e.Name())
		settled := fileExists(filepath.Join(dir, "status.json"))
		add(filepath.Join(dir, "stdout.log"), settled)
		add(filepath.Join(dir, "stderr.log"), settled)
	}
	return out
}

// copyLive reports whether a writer still holds the copy at p: an
// exclusive flock cannot be had without waiting.
func copyLive(p string) (bool, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

// sweepSpills deletes the finished spill files last written before
// cutoff, never a live one. It returns how many it deleted and what it
// could not delete.
func (c *spillCap) sweepSpills(cutoff time.Time) (int, []error) {
	dir := filepath.Join(c.stateDir, "spill")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, []error{err}
	}
	unlock, err := c.lock()
	if err != nil {
		return 0, []error{err}
	}
	defer unlock()
	n := 0
	var failed []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || !fi.ModTime().Before(cutoff) {
			continue
		}
		live, err := copyLive(p)
		switch {
		case errors.Is(err, os.ErrNotExist), live:
			continue
		case err != nil:
			failed = append(failed, fmt.Errorf("checking %q: %w", p, err))
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			failed = append(failed, err)
			continue
		}
		n++
	}
	return n, failed
}
