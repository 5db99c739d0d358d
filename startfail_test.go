package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// startInProcess starts a background task from this process with a plan
// that bypasses a call's checks, so that the start itself fails.
func (e *testEnv) startInProcess(p *callPlan) (*response, error) {
	e.t.Helper()
	inv := &invocation{cfg: defaultConfig(), environ: os.Environ(), getenv: os.Getenv}
	var err error
	if inv.stateDir, err = openStateDir(e.stateDir); err != nil {
		e.t.Fatal(err)
	}
	resp := &response{Present: &presentation{}}
	return resp, inv.startTask(p, &bashArgs{Command: "true", Background: true}, ownerKey("A"), resp)
}

// checkFailedStart: the start is an error with the reason, no task id;
// a later bash_output of the task shows the reason and the killed
// status; no completion notice follows.
func (e *testEnv) checkFailedStart(resp *response, err error, reason string) {
	e.t.Helper()
	want := "cannot start the background task: " + reason
	if _, ok := err.(*toolError); !ok || err.Error() != want || resp.StructuredContent != nil || len(resp.Content) != 0 {
		e.t.Fatalf("start: %v (structured %+v), want the tool error %q", err, resp.StructuredContent, want)
	}
	out := e.call(outputReq("bash-1", "A", ""))
	if !strings.Contains(out.text(), reason) || !strings.HasSuffix(out.text(), statusLine(taskStatus{State: stateKilled})) {
		e.t.Errorf("a later read: %q, want the reason %q and the killed status", out.text(), reason)
	}
	var f taskFinal
	if readJSON(filepath.Join(e.stateDir, "tasks", "bash-1", "status.json"), &f); f.State != stateKilled || f.Note == "" {
		e.t.Errorf("status.json = %+v, want killed with a note", f)
	}
	if r := e.call(sessionReq("bash_list", "{}", "A")); len(r.Notices) != 0 || !strings.Contains(r.text(), "bash-1 killed") {
		e.t.Errorf("bash_list: %q, notices %q; want the task killed and no notice", r.text(), r.Notices)
	}
}

// TestStartFailureSupervisorDies: a supervisor that exits before the
// command starts (here it is handed no command) makes the start an error
// naming what the supervisor said.
func TestStartFailureSupervisorDies(t *testing.T) {
	e := newTestEnv(t, "")
	resp, err := e.startInProcess(&callPlan{workdir: e.workspace, sandbox: &sandboxPlan{Mode: modeFullAccess}})
	e.checkFailedStart(resp, err, "the supervisor exited before the command started: the task spec names no command")
}

// TestStartFailureCommand: a command the supervisor cannot start (its
// workdir vanished after the call was planned) makes the start an error.
func TestStartFailureCommand(t *testing.T) {
	e := newTestEnv(t, "")
	gone := filepath.Join(e.workspace, "gone")
	resp, err := e.startInProcess(&callPlan{workdir: gone, sandbox: &sandboxPlan{Mode: modeFullAccess},
		argv: []string{"/bin/sh", "-c", "true"}})
	e.checkFailedStart(resp, err, "cannot start the command: no such file or directory")
}
