package main

// The tasks of bashcall mcp's own session end with the server. That
// session's id is random and known to the server alone: once the server
// is gone, however it went (SIGKILL, the OOM killer, a crashed client
// taking it down), nothing could list, read or kill them. A clean stop
// kills them (stopOwnTasks); for the rest, the server hands its children
// the hidden flag -reaper OWNERKEY:PID:START, a task of that owner records
// the server as its reaper, and its supervisor stops it (SIGTERM, the kill
// ladder, recorded killed) when the reaper ends. A task of a session the
// client names (_meta.session) is not tied: the client can reach it later.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reaperTie is the owner whose tasks are tied to a process, and that
// process.
type reaperTie struct {
	owner string
	proc  procRecord
}

// newReaperTie is the -reaper value that ties owner's tasks to this
// process.
func newReaperTie(owner string) string {
	start, _ := procStartTime(os.Getpid())
	return fmt.Sprintf("%s:%d:%d", owner, os.Getpid(), start)
}

// parseReaperTie reads a -reaper value; "" ties nothing.
func parseReaperTie(v string) (*reaperTie, error) {
	if v == "" {
		return nil, nil
	}
	f := strings.Split(v, ":")
	if len(f) == 3 && f[0] != "" {
		pid, perr := strconv.Atoi(f[1])
		start, serr := strconv.ParseUint(f[2], 10, 64)
		if perr == nil && serr == nil && pid > 0 {
			return &reaperTie{owner: f[0], proc: procRecord{PID: pid, Start: start, BootID: bootID()}}, nil
		}
	}
	return nil, fmt.Errorf("-reaper must be OWNERKEY:PID:START, got %q", v)
}

// of is the reaper of a task of owner, if it has one.
func (r *reaperTie) of(owner string) *procRecord {
	if r == nil || owner != r.owner {
		return nil
	}
	p := r.proc
	return &p
}

// watchReaper stops the task, as bash_kill would, once its reaper has
// ended; at once if it has already.
func (t *task) watchReaper(stops *stopRequests) {
	r := t.meta.Reaper
	if r == nil {
		return
	}
	go func() {
		w := newWatcher(t.dir, r.PID, r.Start)
		defer w.close()
		for r.alive() {
			w.wait(time.Minute)
		}
		t.markKilled()
		stops.ask(syscall.SIGTERM)
	}()
}
