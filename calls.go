package main

// Foreground calls on record: calls/PID-START.json is the call that the
// bashcall process PID, started at START, is answering. It is written
// before the command exists (its tree's pipes, leftovers.go), updated with
// the leader once there is one, and removed when the call ends with
// nothing left running. Every invocation looks at the records first: one
// whose bashcall is gone (SIGKILL, OOM) has its tree stopped, like an
// orphaned task's, and is removed.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// callRecord is the content of a call record.
type callRecord struct {
	Caller procRecord `json:"caller"`
	Tree   treeRecord `json:"tree"`
}

// callTracker writes this call's record. A nil one records nothing: a
// state dir without room for the record must not keep a call from running
// (it may be the call that frees the room).
type callTracker struct {
	f    *os.File
	path string
	me   procRecord
	size int
}

func (inv *invocation) callsDir() string { return filepath.Join(inv.stateDir, "calls") }

// preparedCall is the record a server's warm child made while it waited
// for its call (prepareCall): a file's creation costs 0.1 ms and more.
var preparedCall atomic.Pointer[callTracker]

// prepareCall makes this process's call record ahead of its call, in the
// state dir stateDir, but only where it and its calls/ are there and
// private already: before its request a waiting child creates, repairs
// and reports nothing else (its call checks the state dir as any does).
func prepareCall(stateDir string) {
	canon, err := filepath.EvalSymlinks(stateDir)
	if err != nil {
		return
	}
	inv := &invocation{stateDir: canon}
	for _, d := range []string{canon, inv.callsDir()} {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || !ownedByMe(fi) {
			return
		}
	}
	if c := inv.newCallRecord(); c != nil {
		preparedCall.Store(c)
	}
}

// dropPreparedCall removes the record made ahead if no call took it: a
// call that starts no command, or a waiting child that a signal ends.
func dropPreparedCall() {
	if c := preparedCall.Swap(nil); c != nil {
		c.done()
	}
}

// trackCall returns this call's record, empty until the command starts:
// the one made ahead when it is still the file at its path in this
// state dir, else a new one.
func (inv *invocation) trackCall() *callTracker {
	if c := preparedCall.Swap(nil); c != nil {
		if fi, err := c.f.Stat(); err == nil && filepath.Dir(c.path) == inv.callsDir() && isStill(c.path, fi) {
			return c
		}
		c.done()
	}
	return inv.newCallRecord()
}

// newCallRecord creates this process's call record.
func (inv *invocation) newCallRecord() *callTracker {
	c := &callTracker{me: procRecord{PID: os.Getpid(), BootID: bootID()}}
	var err error
	if c.me.Start, err = procStartTime(c.me.PID); err != nil {
		return nil // a record that names no start time would look dead
	}
	dir, err := privateDir(inv.callsDir())
	if err != nil {
		return nil
	}
	c.path = filepath.Join(dir, fmt.Sprintf("%d-%d.json", c.me.PID, c.me.Start))
	if c.f, err = os.OpenFile(c.path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600); err != nil {
		return nil
	}
	return c
}

// track records the tree, in place: the record is written before the
// command exists and again once its leader does, and never grows shorter.
func (c *callTracker) track(tree *treeRecord) error {
	if c == nil {
		return nil
	}
	b, err := (&callRecord{Caller: c.me, Tree: *tree}).line()
	if err != nil {
		return err
	}
	for len(b) < c.size {
		b = append(b[:len(b)-1], ' ', '\n')
	}
	c.size = len(b)
	c.f.WriteAt(b, 0)
	return nil
}

// done removes the record once nothing of the call runs.
func (c *callTracker) done() {
	if c != nil {
		os.Remove(c.path)
		c.f.Close()
	}
}

// stopDeadCalls stops what is left of the calls whose bashcall is gone.
func (inv *invocation) stopDeadCalls() {
	d, err := os.Open(inv.callsDir())
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	me := procRecord{PID: os.Getpid(), BootID: bootID()}
	me.Start, _ = procStartTime(me.PID)
	for _, n := range names {
		// This process's own record (a warm child's, made ahead) is alive;
		// one of a dead process whose pid it reuses is not.
		if caller, ok := parseCallName(n); ok && caller != me && !caller.alive() {
			stopDeadCall(filepath.Join(inv.callsDir(), n))
		}
	}
}

// parseCallName reads the caller out of a record's name.
func parseCallName(name string) (procRecord, bool) {
	pid, start, ok := strings.Cut(strings.TrimSuffix(name, ".json"), "-")
	p := procRecord{BootID: bootID()}
	var err1, err2 error
	p.PID, err1 = strconv.Atoi(pid)
	p.Start, err2 = strconv.ParseUint(start, 10, 64)
	return p, ok && strings.HasSuffix(name, ".json") && err1 == nil && err2 == nil
}

// stopDeadCall stops the tree of one dead call and removes its record,
// unless another invocation is at it.
func stopDeadCall(p string) {
	f, err := openOwn(p, os.O_RDONLY)
	if err != nil {
		return
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return
	}
	var st syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) != nil || st.Nlink == 0 {
		return // removed meanwhile
	}
	// An empty record is a caller that died before its command existed.
	var rec callRecord
	if readJSON(p, &rec) == nil {
		rec.Tree.stop()
	}
	os.Remove(p)
}

// line is the record as jsonLine writes it. It is written twice on every
// foreground call's way to its command, and encoding/json's first
// marshal of a type costs a quarter of a millisecond there: the record is
// built by hand, unless a boot id (read from the kernel) would need
// escaping.
func (r *callRecord) line() ([]byte, error) {
	if !plainJSON(r.Caller.BootID) || !plainJSON(r.Tree.BootID) {
		return jsonLine(r)
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"caller":`...)
	b = r.Caller.appendFields(append(b, '{'))
	b = append(b, `},"tree":`...)
	b = r.Tree.appendFields(append(b, '{'))
	if len(r.Tree.Pipes) > 0 {
		b = append(b, `,"pipes":[`...)
		for i, p := range r.Tree.Pipes {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, p, 10)
		}
		b = append(b, ']')
	}
	if r.Tree.Since != 0 {
		b = strconv.AppendUint(append(b, `,"since":`...), r.Tree.Since, 10)
	}
	return append(b, "}}\n"...), nil
}

// appendFields appends p's fields as encoding/json writes them.
func (p *procRecord) appendFields(b []byte) []byte {
	b = strconv.AppendInt(append(b, `"pid":`...), int64(p.PID), 10)
	b = strconv.AppendUint(append(b, `,"start":`...), p.Start, 10)
	return append(append(append(b, `,"bootId":"`...), p.BootID...), '"')
}

// plainJSON reports whether s is a JSON string as it is between quotes:
// printable ASCII without a quote, backslash or a character that
// encoding/json escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// jsonLine is v as one line of JSON.
func jsonLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append(b, '\n'), err
}
