package main

// Answers in out/: each written at most once and, for a call that ran,
// at least once while serve runs (PROTOCOL.md sections 8 and 9).
//
// A response is written to a locked temporary and renamed into place with
// RENAME_NOREPLACE (or hard-linked, where that is missing), so an existing
// response is never replaced, not even by a race. One that
// cannot be written (a full disk) is kept in memory and retried while the
// claim stays locked; if serve stops first, the claim is renamed to
// cur/.ran.NAME so that the next start can say that the call ran. A start
// answers each claim nobody holds with what is known, and removes the
// temporaries a killed serve left.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// respond writes out/NAME.json, never replacing one that is there
// (os.ErrExist).
func (s *spool) respond(name string, line []byte) error {
	dst, ok := responseName(name)
	if !ok {
		return fmt.Errorf("no response name can be derived from %q", name)
	}
	return publish(filepath.Join(s.dir, "out", dst), line)
}

// deliver writes the response of a call that ran and releases its claim.
// A response that cannot be written (a full disk) is kept and retried
// apart, so that this worker can take the next call; the claim stays
// locked meanwhile, so that no serve answers it as interrupted.
func (s *spool) deliver(name, claimed string, f *os.File, line []byte) {
	err := s.respond(name, line)
	if err == nil || errors.Is(err, os.ErrExist) {
		s.release(name, claimed, f, err)
		return
	}
	fmt.Fprintf(s.stderr, "bashcall serve: %s: %v; retrying until it can be written\n", name, err)
	s.pending.Add(1)
	go s.retry(name, claimed, f, line)
}

// release removes the claim of an answered call, and logs a response that
// was dropped because out/ already held one.
func (s *spool) release(name, claimed string, f *os.File, err error) {
	if err != nil {
		fmt.Fprintf(s.stderr, "bashcall serve: %s: out/ already holds a response; this one was dropped\n", name)
	}
	os.Remove(claimed)
	f.Close()
}

// retry writes a kept response with a growing delay while serve runs.
// When serve stops waiting (settle) and it still cannot be written, the
// claim is renamed to cur/.ran.NAME, which costs no space, so that the
// next start says that the call ran instead of that it was cut short.
func (s *spool) retry(name, claimed string, f *os.File, line []byte) {
	defer s.pending.Done()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		last := false
		select {
		case <-time.After(wait):
		case <-s.giveUp:
			last = true
		}
		err := s.respond(name, line)
		if err == nil || errors.Is(err, os.ErrExist) {
			fmt.Fprintf(s.stderr, "bashcall serve: %s: the response is written\n", name)
			s.release(name, claimed, f, err)
			return
		}
		if last {
			fmt.Fprintf(s.stderr, "bashcall serve: %s: %v; stopping with the call unanswered\n", name, err)
			os.Rename(claimed, filepath.Join(s.dir, "cur", ranPrefix+filepath.Base(claimed)))
			f.Close()
			return
		}
	}
}

// ranPrefix marks a claim whose call ran but whose response could not be
// written; no claim of a call starts with a dot.
const ranPrefix = ".ran."

// settle waits up to grace_ms for responses still being retried, then has
// them give up.
func (s *spool) settle() {
	done := make(chan struct{})
	go func() {
		s.pending.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(s.inv.grace()):
	}
	close(s.giveUp)
	<-done
}

// recoverInterrupted answers, once, each call in cur/ that no live process
// holds: it was claimed by a serve that stopped before answering.
func (s *spool) recoverInterrupted() {
	d, err := os.Open(filepath.Join(s.dir, "cur"))
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, name := range names {
		s.recoverOne(name)
	}
}

// recoverOne answers the claim cur/NAME if no live process holds it,
// saying what is known: that serve stopped before answering, or, for a
// .ran. claim, that the call ran but its response could not be written.
// A claim whose response is already in out/ is only removed.
func (s *spool) recoverOne(name string) {
	p := filepath.Join(s.dir, "cur", name)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return // being answered
	}
	held, err := f.Stat()
	if err != nil || !isStill(p, held) {
		return // answered and removed meanwhile
	}
	call, ran := strings.CutPrefix(name, ranPrefix)
	why := interruptedText
	if ran {
		why = unansweredText
	}
	data, _ := io.ReadAll(io.LimitReader(f, maxRequestBytes))
	err = s.respond(call, errorLine(requestID(data), toolErrorf("%s", why)))
	if err != nil && !errors.Is(err, os.ErrExist) {
		fmt.Fprintf(s.stderr, "bashcall serve: %s: %v\n", call, err)
		return
	}
	os.Remove(p)
}

// What a restarted serve answers for a call it finds claimed.
const (
	interruptedText = "interrupted: the bashcall serve process that claimed this call stopped before answering it; it was not run again"
	unansweredText  = "interrupted: the call ran, but the bashcall serve process that ran it could not write its response before it stopped; it was not run again"
)

// isTempName says whether name is one of the temporaries publish writes:
// ".NAME.<16 lowercase hex>.tmp", NAME not empty and without a newline
// (the regular expression ^\..+\.[0-9a-f]{16}\.tmp$, without the regexp
// package and its start-up cost in every bashcall process).
func isTempName(name string) bool {
	if len(name) < len(".N.0123456789abcdef.tmp") || name[0] != '.' || !strings.HasSuffix(name, ".tmp") ||
		strings.Contains(name, "\n") {
		return false
	}
	mid := name[1 : len(name)-len(".tmp")] // NAME.<16 hex>
	if mid[len(mid)-17] != '.' {
		return false
	}
	for _, c := range mid[len(mid)-16:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// removeStaleTemps removes the temporaries in dir that no live process
// writes: publish holds a lock on its temporary until it is gone.
func removeStaleTemps(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		if isTempName(n) {
			removeUnlocked(filepath.Join(dir, n))
		}
	}
}

// removeUnlocked removes the regular file p unless a process holds a lock
// on it.
func removeUnlocked(p string) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return
	}
	if held, err := f.Stat(); err == nil && held.Mode().IsRegular() && isStill(p, held) {
		os.Remove(p)
	}
}

// isStill reports whether path still names the file fi describes.
func isStill(path string, fi os.FileInfo) bool {
	now, err := os.Lstat(path)
	return err == nil && os.SameFile(now, fi)
}

// publish writes data to p through a locked temporary, synced, then
// renamed to p: readers see all of it or nothing, and an existing p is
// never replaced, not even by a race (the error then matches
// os.ErrExist). A full disk shows as an error here, not as a short file.
func publish(p string, data []byte) error {
	f, tmp, err := lockedTemp(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %q: %w", p, err)
	}
	defer f.Close()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = placeNoReplace(tmp, p)
	}
	if err != nil {
		return fmt.Errorf("writing %q: %w", p, err)
	}
	return nil
}

// placeNoReplace moves tmp to p unless p exists (os.ErrExist): a rename,
// so that clients watching for one see it; where the system or the
// filesystem has no rename that refuses to replace, a hard link (tmp's
// name is removed by the caller).
func placeNoReplace(tmp, p string) error {
	err := renameNoReplace(tmp, p)
	if errors.Is(err, errors.ErrUnsupported) {
		return os.Link(tmp, p)
	}
	return err
}

// lockedTemp creates a private temporary in dir and locks it, so that a
// serve starting meanwhile does not take it for one a killed serve left.
// If such a serve removed it before the lock was taken, it makes another.
func lockedTemp(dir, pattern string) (*os.File, string, error) {
	for range 10 {
		f, tmp, err := createPrivate(dir, pattern)
		if err != nil {
			return nil, "", err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if fi, serr := f.Stat(); err == nil && serr == nil && isStill(tmp, fi) {
			return f, tmp, nil
		}
		f.Close()
		if err != nil {
			os.Remove(tmp)
			return nil, "", err
		}
	}
	return nil, "", errors.New("temporary files keep disappearing")
}
