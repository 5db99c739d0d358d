package main

// The tools over background tasks: bash_output, bash_kill, bash_list.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// taskOutput answers bash_output.
func (inv *invocation) taskOutput(req *request, resp *response) error {
	if req.ArgsErr != nil {
		return req.ArgsErr
	}
	a, err := parseTaskArgs(req.Args, true)
	if err != nil {
		return err
	}
	caller := ownerKey(req.Session.ID)
	t, err := inv.openTask(a.TaskID, caller, toolOutput)
	if err != nil {
		return err
	}
	defer t.release()
	final := t.final()
	if a.Wait && final == nil {
		if err := spareDescriptors(waitDescriptors); err != nil {
			return errCannotLook(toolOutput, t.id, err)
		}
		timeout := inv.cfg.Background.WaitTimeoutMs
		if a.TimeoutMs > 0 {
			timeout = a.TimeoutMs
		}
		timeout = min(timeout, inv.cfg.Background.MaxWaitTimeoutMs)
		final = t.waitSettled(time.Duration(timeout)*time.Millisecond, inv.abort)
	}
	r, err := t.consume(final != nil)
	if err != nil {
		return err
	}
	r.Status = taskStatus{State: stateRunning}
	out := &taskOutputResult{Kind: "taskOutput", TaskID: t.id, Status: stateRunning,
		Stdout: r.Stdout, Stderr: r.Stderr, Lossy: r.Lossy, FullOutput: r.FullPaths}
	if final != nil {
		r.Status, r.Sandbox = final.taskStatus, final.Sandbox
		out.Status, out.Sandbox = final.State, final.Sandbox
		out.ExitCode, out.Signal = exitFields(r.Status)
		// The owner's notice is not dropped: this response, the owner's
		// next since the task settled, carries it (handle).
	}
	resp.StructuredContent = out
	setText(resp, renderTaskRead(r, inv.escalationAdvertised()), nil)
	return nil
}

// taskKill answers bash_kill: SIGTERM to the whole tree through its
// supervisor, SIGKILL grace later; it returns once the task has settled.
func (inv *invocation) taskKill(req *request, resp *response) error {
	if req.ArgsErr != nil {
		return req.ArgsErr
	}
	a, err := parseTaskArgs(req.Args, false)
	if err != nil {
		return err
	}
	t, err := inv.openTask(a.TaskID, ownerKey(req.Session.ID), toolKill)
	if err != nil {
		return err
	}
	defer t.release()
	result := &taskKillResult{Kind: "taskKill", TaskID: t.id}
	resp.StructuredContent = result
	if !t.killable() {
		t.final() // settles a task that vanished unrecorded
		setText(resp, textAlreadyDone(t.id), nil)
		return nil
	}
	marked, ours := t.markKilled()
	// A killed task carries no notice; the kill that made the marker
	// takes it (and gives it back if the task is not stopped after all).
	// It takes it before it looks for a status: a supervisor that
	// recorded one without a stop gives back what was held by then, and
	// this kill what it took after.
	consumed := (ours || !marked) && inv.holdNotice(t)
	if fileExists(filepath.Join(t.dir, "status.json")) { // it settled before the marker existed
		if consumed {
			t.giveNoticeBack()
		}
		setText(resp, textAlreadyDone(t.id), nil)
		return nil
	}
	if marked && !ours {
		// Another bash_kill is stopping it: a second SIGTERM would cut
		// the command's grace short. Wait for that one, and stop the task
		// here only if it has not settled by then (its killer died).
		wait := time.Duration(t.meta.GraceMs)*time.Millisecond + 6*time.Second
		deadline := time.Now().Add(wait)
		if t.waitSettled(wait, inv.abort) == nil && !time.Now().Before(deadline) { // not aborted
			err = t.stop()
		}
	} else {
		err = t.stop()
	}
	f := t.final()
	// The supervisor gives back the notice this kill held when no kill
	// stopped the task, even one that died of a signal of its own.
	givenBack := consumed && f != nil && !fileExists(filepath.Join(t.dir, "notice.held"))
	if f != nil && (f.State != stateKilled || givenBack) {
		// It ended on its own first (the supervisor looked for the
		// marker before there was one, or had not been asked to stop):
		// it was not killed, and its notice is still due.
		if consumed {
			t.giveNoticeBack()
		}
		setText(resp, textAlreadyDone(t.id), nil)
		return nil
	}
	if f == nil && !exists(t.dir) {
		// Removed from outside bashcall (gc cannot while this kill holds
		// it): stopped, whether by this kill or on its own, and with its
		// notice gone along.
		f = &taskFinal{taskStatus: taskStatus{State: stateKilled}}
	}
	if f == nil {
		if ours { // the task may yet complete: it was not killed
			os.Rename(filepath.Join(t.dir, "kill"), filepath.Join(t.dir, "kill.reserve"))
		}
		if consumed { // give the notice back
			t.giveNoticeBack()
		}
		why := "it did not stop"
		if err != nil {
			why = err.Error()
		}
		return toolErrorf("could not stop background task %s (%s); it is still running: call bash_kill again", t.id, why)
	}
	result.Killed = true
	setText(resp, textKilled(t.id), nil)
	return nil
}

// markKilled leaves the kill marker, by which the supervisor records the
// task as killed rather than completed: the kill.reserve the supervisor
// made at its start, renamed (no inode or block is needed, so a full disk
// cannot keep a task from being killed), or a new file for a task of an
// earlier bashcall. ours says this call made it; marked false says it
// could not be made, and the task is stopped all the same.
func (t *task) markKilled() (marked, ours bool) {
	marker := filepath.Join(t.dir, "kill")
	if err := renameNoReplace(filepath.Join(t.dir, "kill.reserve"), marker); err == nil {
		return true, true
	}
	f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		f.Close()
		return true, true
	}
	return errors.Is(err, fs.ErrExist), false
}

// taskList answers bash_list.
func (inv *invocation) taskList(req *request, resp *response) error {
	if req.ArgsErr != nil {
		return req.ArgsErr
	}
	if err := spareDescriptors(toolDescriptors); err != nil {
		// Each task's look would take "cannot open" for "gone".
		return toolErrorf("cannot list background tasks now (%v); call bash_list again", err)
	}
	entries := inv.listTasks(ownerKey(req.Session.ID))
	result := &taskListResult{Kind: "taskList", Tasks: []taskListEntry{}}
	for _, e := range entries {
		code, sig := exitFields(e.Status)
		result.Tasks = append(result.Tasks, taskListEntry{TaskID: e.ID, Status: e.Status.State,
			ExitCode: code, Signal: sig, Command: e.Command})
	}
	resp.StructuredContent = result
	setText(resp, renderList(entries), nil)
	return nil
}
