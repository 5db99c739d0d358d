package main

// A background task that cannot start (PROTOCOL.md section 6): the start
// is an error response with the reason, never "started" followed by a
// bare "[status: killed]". The task that was allocated for it settles
// with the reason in its status note and on its stderr, where a later
// bash_output shows it, and carries no completion notice: the error
// response was the news.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// noteNotStarted is the status note of a task whose command the
// supervisor could not start.
const noteNotStarted = "the command could not be started"

// notStarted is the reason the supervisor, having said "ok", recorded
// that the command could not start, or nil when the command runs (or ran,
// or its sandbox runner failed, which a read reports as such).
func (t *task) notStarted() error {
	var f taskFinal
	if readJSON(filepath.Join(t.dir, "status.json"), &f) != nil || f.Note != noteNotStarted {
		return nil
	}
	if why := lastLine(t, "stderr.tail"); why != "" {
		return errors.New(why)
	}
	return errors.New(noteNotStarted)
}

// lastLine is the last non-empty line of a file of the task (at most its
// last 4 KiB), without bashcall's "bashcall: " prefix.
func lastLine(t *task, name string) string {
	var b []byte
	if name == "stderr.tail" {
		b = readTaskStream(filepath.Join(t.dir, name), 0, 4096).data
	} else if f, err := openOwn(filepath.Join(t.dir, name), os.O_RDONLY); err == nil {
		var buf [4096]byte
		if fi, err := f.Stat(); err == nil {
			n, _ := f.ReadAt(buf[:], max(fi.Size()-int64(len(buf)), 0))
			b = buf[:n]
		}
		f.Close()
	}
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return strings.TrimPrefix(validText(b), "bashcall: ")
}

// failStart settles a task that could not start, unless its supervisor
// already did: killed, the reason on its stderr and in its status note.
// The streams are opened before the task's lock is taken, since opening
// them takes that lock too.
func (t *task) failStart(reason error) {
	outs, outsErr := openTaskStreams(t, false)
	if outsErr == nil {
		defer outs[0].close()
		defer outs[1].close()
	}
	unlock, err := lockFile(filepath.Join(t.dir, "lock"))
	if err != nil {
		return
	}
	defer unlock()
	if fileExists(filepath.Join(t.dir, "status.json")) {
		return
	}
	if outsErr == nil {
		fmt.Fprintf(outs[1], "bashcall: cannot start the background task: %v\n", reason)
	}
	t.record(&taskFinal{taskStatus: taskStatus{State: stateKilled}, FinishedAt: time.Now().UnixMilli(), Note: "could not start: " + reason.Error()})
}

// stopLeftovers stops what of the command did start, once its supervisor
// is gone (the rule of leftovers.go: only what provably belongs to it).
func (t *task) stopLeftovers() {
	var sup procRecord
	if readJSON(filepath.Join(t.dir, "supervisor.json"), &sup) == nil && t.supervisorLive(&sup) {
		return
	}
	var cmd treeRecord
	if readJSON(filepath.Join(t.dir, "command.json"), &cmd) == nil {
		cmd.stop()
	}
}
