package main

// A task's output on disk, and the tools that read, kill and list tasks.
//
// Each stream has a complete copy (NAME.log) while it stays within
// max_spill_bytes, and a tail file (NAME.tail, see ring.go) holding the
// newest twice max_output_bytes of it. Only the supervisor writes them. A
// read costs what it returns, never what the task wrote before, and a task
// printing forever keeps at most max_spill_bytes plus the ring per stream
// on disk. The ring, the read cursors and the lock are created with their
// space when the task starts, so that a disk that fills later loses the
// complete copy, never what a read returns or where it stands.

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
	"unicode/utf8"
)

// diskStream is the supervisor's writer for one stream.
type diskStream struct {
	ring     *tailRing
	capacity int64
	total    int64
	full     *spillFile // nil once the complete copy is given up
	spillMax int64
	last     *tail // for the denial classifier
}

// openTaskStreams creates the stdout and stderr files of a task. The
// complete copies, unless complete is false, go to the spill directory
// under random names (recorded in full.json), where a confined command can
// read one by the exact path it was given and cannot find the others. On
// an error, what it opened is closed again.
func openTaskStreams(t *task, complete bool) (s [2]*diskStream, err error) {
	defer func() {
		if err != nil {
			for _, d := range s {
				if d != nil {
					if d.full != nil {
						d.dropFull()
					}
					d.close()
				}
			}
		}
	}()
	fulls := map[string]string{}
	for i, name := range []string{"stdout", "stderr"} {
		d := &diskStream{capacity: 2 * t.meta.MaxOutputBytes, spillMax: t.meta.MaxSpillBytes,
			last: newTail(int(t.meta.MaxOutputBytes))}
		flags := os.O_RDWR | os.O_CREATE | os.O_EXCL | syscall.O_NOFOLLOW
		ring, err := os.OpenFile(filepath.Join(t.dir, name+".tail"), flags, 0o600)
		if err != nil {
			return s, err
		}
		if d.ring, err = newTailRing(ring, d.capacity); err != nil {
			ring.Close()
			return s, err
		}
		s[i] = d
		if !complete {
			continue
		}
		spillDir, err := privateDir(t.stateDir(), "spill")
		if err != nil {
			continue // no complete copy
		}
		full, fullPath, err := createPrivate(spillDir, "*-"+t.id+"-"+name+".log")
		if err != nil {
			continue
		}
		if d.full, _ = taskSpillCap(t).adopt(full, fullPath); d.full != nil {
			fulls[name] = fullPath
		}
	}
	if err := writeJSON(filepath.Join(t.dir, "full.json"), fulls); err != nil {
		return s, err
	}
	if err := writeCursors(t, [2]int64{}); err != nil {
		return s, err
	}
	unlock, err := lockFile(filepath.Join(t.dir, "lock"))
	if err == nil {
		unlock()
	}
	return s, err
}

// Write never fails: a full disk loses the complete copy, not the command.
func (d *diskStream) Write(p []byte) (int, error) {
	if d.full != nil && (d.total+int64(len(p)) > d.spillMax || d.full.write(p) != nil) {
		d.dropFull()
	}
	d.ring.write(p)
	d.total += int64(len(p))
	d.last.write(p)
	return len(p), nil
}

func (d *diskStream) dropFull() {
	d.full.remove()
	d.full = nil
}

func (d *diskStream) tailBytes() []byte { return d.last.bytes() }

func (d *diskStream) close() {
	d.full.release()
	d.ring.f.Close()
}

// holdBackPartialRune keeps an incomplete UTF-8 character at the end of a
// running task's output for the next read, instead of splitting it.
func holdBackPartialRune(r *streamRead) {
	for k := 1; k <= 3 && k <= len(r.data); k++ {
		b := r.data[len(r.data)-k]
		if b < utf8.RuneSelf {
			return
		}
		if utf8.RuneStart(b) {
			if !utf8.FullRune(r.data[len(r.data)-k:]) {
				r.data = r.data[:len(r.data)-k]
				r.next -= int64(k)
			}
			return
		}
	}
}

// readCursors and writeCursors keep the two stream cursors of a task.
func readCursors(t *task) [2]int64 {
	var c [2]int64
	var b []byte
	f, err := openOwn(filepath.Join(t.dir, "cursor"), os.O_RDONLY)
	if err == nil {
		b, err = io.ReadAll(io.LimitReader(f, 17))
		f.Close()
	}
	if err == nil && len(b) == 16 {
		c[0] = int64(binary.LittleEndian.Uint64(b[:8]))
		c[1] = int64(binary.LittleEndian.Uint64(b[8:]))
	}
	return c
}

func writeCursors(t *task, c [2]int64) error {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(c[0]))
	binary.LittleEndian.PutUint64(b[8:], uint64(c[1]))
	f, err := openOwn(filepath.Join(t.dir, "cursor"), os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b[:], 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// consume reads the output produced since the previous read, under the
// task's lock, so that each byte is delivered once to concurrent readers.
func (t *task) consume(settled bool) (*taskRead, error) {
	unlock, err := lockFile(filepath.Join(t.dir, "lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	before := readCursors(t)
	cursors := before
	r := &taskRead{}
	for i, name := range []string{"stdout", "stderr"} {
		s := readTaskStream(filepath.Join(t.dir, name+".tail"), cursors[i], t.meta.MaxOutputBytes)
		if !settled {
			holdBackPartialRune(&s)
		}
		cursors[i] = s.next
		text := validText(s.data)
		if i == 0 {
			r.Stdout = text
		} else {
			r.Stderr = text
		}
		if s.lossy {
			r.Lossy = true
			if full := t.fullPath(name); full != "" && fileExists(full) {
				r.FullPaths = append(r.FullPaths, full)
			}
		}
	}
	if cursors == before {
		return r, nil // nothing to write: a read with nothing new writes nothing, not even on a full disk
	}
	return r, writeCursors(t, cursors)
}

// fullPath is where a task's complete copy of a stream is, "" when it has
// none.
func (t *task) fullPath(name string) string {
	var fulls map[string]string
	if readJSON(filepath.Join(t.dir, "full.json"), &fulls) != nil {
		return ""
	}
	return fulls[name]
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// waitSettled blocks until the task settles or timeout passes, woken by
// inotify on the task's directory and the exit of what keeps it alive: its
// supervisor, or its starter until the supervisor has recorded itself. A
// wait that ends with no status seen (timed out, aborted, or that process
// gone) looks at the task once more, and settles it if nothing recorded
// it, after the watcher is closed: short of descriptors a look beside the
// watcher cannot tell.
func (t *task) waitSettled(timeout time.Duration, abort <-chan os.Signal) *taskFinal {
	deadline := time.Now().Add(timeout)
	w := newWatcher(t.dir, 0, 0)
	aborted := make(chan struct{})
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-abort:
			close(aborted)
			w.interrupt()
		case <-stop:
		}
	}()
	f := t.watchSettled(w, deadline, aborted)
	close(stop)
	<-done // the watcher is closed only once nothing can interrupt it
	w.close()
	if f == nil {
		f = t.final()
	}
	return f
}

// watchSettled is waitSettled's loop: the status, or nil once deadline
// passes, the wait is aborted or what keeps the task alive has exited.
func (t *task) watchSettled(w *watcher, deadline time.Time, aborted <-chan struct{}) *taskFinal {
	supPath := filepath.Join(t.dir, "supervisor.json")
	keeper, recorded := t.meta.Starter, false // the process final() reads the task by
	watchRecorded := func() bool {
		var sup procRecord
		if readJSON(supPath, &sup) != nil {
			return false
		}
		keeper, recorded = sup, true
		w.watchProcess(keeper.PID, keeper.Start)
		return true
	}
	if !watchRecorded() {
		w.watchProcess(keeper.PID, keeper.Start)
	}
	for {
		if f := t.final(); f != nil {
			return f
		}
		left := time.Until(deadline)
		select {
		case <-aborted:
			return nil
		default:
		}
		if left <= 0 {
			return nil
		}
		exited := w.wait(left)
		if !recorded {
			watchRecorded() // the starter exits once it has
		}
		if slices.Contains(exited, keeper.PID) {
			return nil
		}
	}
}
