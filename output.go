package main

// Bounded capture of a foreground stream: an exact byte tail in memory and,
// from the first overflow, the whole stream from byte 0 in a private spill
// file, given up (and deleted) past max_spill_bytes.

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// tail keeps the last len(buf) bytes written: byte n of the stream lives
// at buf[n % len(buf)].
type tail struct {
	buf   []byte
	total int64
}

func newTail(size int) *tail { return &tail{buf: make([]byte, size)} }

// write appends p, keeping only what fits.
func (t *tail) write(p []byte) {
	size := int64(len(t.buf))
	if int64(len(p)) > size {
		t.total += int64(len(p)) - size
		p = p[int64(len(p))-size:]
	}
	for len(p) > 0 {
		at := t.total % size
		n := copy(t.buf[at:], p)
		p, t.total = p[n:], t.total+int64(n)
	}
}

// bytes returns the kept bytes, oldest first.
func (t *tail) bytes() []byte {
	size := int64(len(t.buf))
	if t.total <= size {
		return t.buf[:t.total]
	}
	at := t.total % size
	return append(append([]byte{}, t.buf[at:]...), t.buf[:at]...)
}

// capture collects one stream; it is an io.Writer that never fails, so
// that a slow or full disk never stalls the command's pipe.
type capture struct {
	tail     *tail
	spillMax int64
	budget   *spillCap // where the complete copy goes, and its total cap
	name     string    // "stdout" or "stderr"

	spill *spillFile
	gone  bool // the complete copy is unavailable
}

func newCapture(tailMax, spillMax int64, budget *spillCap, name string) *capture {
	return &capture{tail: newTail(int(tailMax)), spillMax: spillMax, budget: budget, name: name}
}

// Write keeps p in the tail and, once the tail has overflowed, in the spill.
func (c *capture) Write(p []byte) (int, error) {
	if !c.gone && c.spill == nil && c.tail.total+int64(len(p)) > int64(len(c.tail.buf)) {
		c.openSpill()
	}
	if c.spill != nil {
		c.toSpill(p)
	}
	c.tail.write(p)
	return len(p), nil
}

// openSpill starts the complete copy with everything so far, which the tail
// still holds whole because this is its first overflow.
func (c *capture) openSpill() {
	var err error
	if c.spill, err = c.budget.create("*-" + c.name + ".log"); err != nil {
		c.gone = true
		return
	}
	c.toSpill(c.tail.bytes())
}

func (c *capture) toSpill(p []byte) {
	if c.spill.written+int64(len(p)) > c.spillMax || c.spill.write(p) != nil {
		c.dropSpill()
	}
}

// dropSpill deletes an incomplete copy: a partial file must never be
// reported as the full output.
func (c *capture) dropSpill() {
	c.spill.remove()
	c.spill, c.gone = nil, true
}

// result returns the stream as the response carries it. The spill stays
// live (and so safe from eviction and gc) until release.
func (c *capture) result() streamResult {
	r := streamResult{Text: validText(c.tail.bytes()), Truncated: c.tail.total > int64(len(c.tail.buf))}
	if c.spill != nil {
		r.SpillPath = c.spill.path
	}
	return r
}

// release lets the spill be evicted: call it once the response that
// offers its path is written.
func (c *capture) release() { c.spill.release() }

// validText turns captured bytes into a JSON-safe string: invalid UTF-8
// (including a character cut by the tail) becomes U+FFFD.
func validText(b []byte) string {
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// createPrivate creates a new file in dir named by pattern, its "*"
// replaced by 16 random hex digits: 0600, O_EXCL and O_NOFOLLOW, so that
// nothing planted in advance is reused.
func createPrivate(dir, pattern string) (*os.File, string, error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	p := filepath.Join(dir, strings.Replace(pattern, "*", hex.EncodeToString(rnd[:]), 1))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	return f, p, err
}
