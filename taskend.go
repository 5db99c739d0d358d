package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// How a background task ends: its one recorded status (status.json, kept
// room for it on a full disk), stopping it (bash_kill), and settling a task
// whose supervisor vanished. Starting and supervising are supervisor.go;
// what is left of a dead tree, and who owns it, is leftovers.go.

// taskFinal is status.json.
type taskFinal struct {
	taskStatus
	FinishedAt int64         `json:"finishedAt"`
	Sandbox    *sandboxFacts `json:"sandbox,omitempty"`
	Note       string        `json:"note,omitempty"`
	// noticeDue: no kill stopped the task, so a notice a kill holds is
	// given back once the status is recorded.
	noticeDue bool
}

// final returns the task's final status, or nil while it runs. A task
// whose supervisor is gone is settled here.
func (t *task) final() *taskFinal {
	var f taskFinal
	if readJSON(filepath.Join(t.dir, "status.json"), &f) == nil {
		return &f
	}
	var sup procRecord
	if err := readJSON(filepath.Join(t.dir, "supervisor.json"), &sup); err != nil {
		sup = t.meta.Starter // not recorded yet: the task is as alive as its starter
	}
	if t.supervisorLive(&sup) {
		return nil
	}
	return t.settleOrphan()
}

// settleOrphan settles a task whose supervisor vanished without a status:
// under the task lock, it stops what is left of the command and records
// it as killed.
func (t *task) settleOrphan() *taskFinal {
	unlock, err := lockFile(filepath.Join(t.dir, "lock"))
	if err != nil {
		return nil
	}
	defer unlock()
	// Short of descriptors, each look below would take "cannot open" for
	// "gone" and settle a task that lives: it cannot tell, and settles
	// nothing.
	if spareDescriptors(4) != nil {
		return nil
	}
	var f taskFinal
	if readJSON(filepath.Join(t.dir, "status.json"), &f) == nil {
		return &f
	}
	var sup procRecord
	if readJSON(filepath.Join(t.dir, "supervisor.json"), &sup) == nil && t.supervisorLive(&sup) {
		return nil // it recorded itself after all
	}
	var cmd treeRecord
	var left []int
	if readJSON(filepath.Join(t.dir, "command.json"), &cmd) == nil {
		left = cmd.stop()
	}
	f = taskFinal{taskStatus: taskStatus{State: stateKilled}, FinishedAt: time.Now().UnixMilli(),
		Note: "the supervisor exited without recording how the command ended" + leftNote(left)}
	t.record(&f)
	return &f
}

// record writes the final status and clears the running mark. It fills
// status.reserve when there is one: written in place and renamed, that
// needs no room a full disk could refuse.
func (t *task) record(f *taskFinal) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	p := filepath.Join(t.dir, "status.json")
	if fillReserve(filepath.Join(t.dir, "status.reserve"), b, p) != nil {
		if err := writeFileAtomic(p, b); err != nil {
			return err
		}
	}
	os.Remove(filepath.Join(sessionDir(t.stateDir(), t.meta.Owner), "running", t.id))
	return nil
}

// stateDir is the state dir the task is in (its dir is STATEDIR/tasks/ID).
func (t *task) stateDir() string { return filepath.Dir(filepath.Dir(t.dir)) }

// statusReserveSize is the room kept for a final status.
const statusReserveSize = 4096

// reserveStatus makes status.reserve, with the room a final status needs.
func (t *task) reserveStatus() error {
	p := filepath.Join(t.dir, "status.reserve")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, statusReserveSize))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p)
	}
	return err
}

// fillReserve writes b over the reserve and renames it to p.
func fillReserve(reserve string, b []byte, p string) error {
	f, err := openOwn(reserve, os.O_WRONLY)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Truncate(int64(len(b)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(reserve, p)
	}
	return err
}

// killable reports whether anything of the task may still run: it has no
// final status, and its supervisor, a process of its command's session or
// (while it is being started) its starter lives.
func (t *task) killable() bool {
	if fileExists(filepath.Join(t.dir, "status.json")) {
		return false
	}
	var sup procRecord
	var cmd treeRecord
	if readJSON(filepath.Join(t.dir, "supervisor.json"), &sup) != nil {
		return t.meta.Starter.alive()
	}
	if t.supervisorLive(&sup) {
		return true
	}
	return readJSON(filepath.Join(t.dir, "command.json"), &cmd) == nil && cmd.anyLeft()
}

// stop asks the supervisor to stop the task and waits for the status it
// records. A supervisor that is gone, or does not answer within grace and
// some slack, is replaced: what is left is killed and the task settled.
func (t *task) stop() error {
	var sup procRecord
	// A task that another invocation is still starting has no supervisor
	// on record yet: give it the moment it needs.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if readJSON(filepath.Join(t.dir, "supervisor.json"), &sup) == nil || !t.meta.Starter.alive() || time.Now().After(deadline) {
			break
		}
	}
	grace := time.Duration(t.meta.GraceMs) * time.Millisecond
	var err error
	if t.supervisorLive(&sup) {
		// Checked again once the pidfd is open: a pid reused within the
		// start time's tick holds no lock.
		still := func() bool { return t.supervisorLive(&sup) }
		if err = signalProcessIf(sup.PID, sup.Start, syscall.SIGTERM, still); err == nil {
			if t.waitSettled(grace+5*time.Second, nil) != nil {
				t.waitSupervisorGone(&sup) // and its last step: the notice it gives back
				return nil
			}
			err = signalProcessIf(sup.PID, sup.Start, syscall.SIGKILL, still)
		}
	}
	var cmd treeRecord
	if readJSON(filepath.Join(t.dir, "command.json"), &cmd) == nil {
		cmd.stop()
	}
	t.waitSupervisorGone(&sup)
	if t.final() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signalling its supervisor: %w", err)
	}
	return nil
}

// waitSupervisorGone waits, a second at most, for sup to exit.
func (t *task) waitSupervisorGone(sup *procRecord) {
	for deadline := time.Now().Add(time.Second); t.supervisorLive(sup) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// supervisorLive reports whether sup, the task's supervisor on record,
// still runs: its pid with its start time and, for one that holds it, the
// lock on its supervisor.json. A start time is counted in ticks of 10 ms,
// so a supervisor that died within one of starting can have its pid
// reused by a process with the same start time, which holds no lock: it
// is neither taken for the task's supervisor nor signalled.
func (t *task) supervisorLive(sup *procRecord) bool {
	return sup.alive() && (!sup.Locked || recordLocked(filepath.Join(t.dir, "supervisor.json")))
}
