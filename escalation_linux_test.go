package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEscalation: every path of an escalating call, with its exact text.
func TestEscalation(t *testing.T) {
	requireABI(t, 1) // every case runs confined (newConfinedEnv)
	approver := func(script string) string {
		p := filepath.Join(testBase, fmt.Sprintf("approver-%d", time.Now().UnixNano()))
		os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755)
		return p
	}
	asked := filepath.Join(testBase, fmt.Sprintf("asked-%d", time.Now().UnixNano()))
	withCommand := func(script string) string {
		return "[approval]\ncommand = [" + jsonString(approver("echo asked >> "+asked+"; cat > /dev/null; "+script)) + "]\n"
	}
	ro := "timeout_ms = 2000\n[sandbox]\nmode = \"read-only\"\n"
	esc := `"sandbox_permissions":"workspace-write","justification":"It must write the build output."`
	req := func(approval string) string {
		s := `{"name":"bash","arguments":{"command":"echo x > out.txt && echo wrote","description":"d",` + esc + `}`
		if approval != "" {
			s += `,"approval":` + jsonString(approval)
		}
		return s + "}"
	}
	tests := []struct {
		name, config, req string
		wantAsked         bool
		wantRun           bool
	}{
		{name: "request_allowed", config: ro, req: req("allowed-once"), wantRun: true},
		{name: "request_rejected", config: ro, req: req("rejected")},
		{name: "request_cancelled", config: ro, req: req("cancelled")},
		{name: "no_channel", config: ro, req: req("")},
		{name: "policy_never", config: ro + "[approval]\npolicy = \"never\"\n", req: req("allowed-once")},
		{name: "command_allowed", config: ro + withCommand("echo allowed-once"), req: req(""), wantAsked: true, wantRun: true},
		{name: "command_rejected", config: ro + withCommand("echo rejected"), req: req(""), wantAsked: true},
		{name: "command_unknown_word", config: ro + withCommand("echo sure"), req: req(""), wantAsked: true},
		{name: "command_fails", config: ro + withCommand("echo allowed-once; exit 1"), req: req(""), wantAsked: true},
		{name: "command_hangs", config: ro + withCommand("sleep 30"), req: req(""), wantAsked: true},
		{name: "request_beats_command", config: ro + withCommand("echo rejected"), req: req("allowed-once"), wantRun: true},
		{name: "not_wider_never_asks", config: withCommand("echo allowed-once"), req: req("")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(asked)
			e := newConfinedEnv(t, tt.config)
			start := time.Now()
			r := e.call(tt.req)
			if time.Since(start) > 20*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			text := r.text()
			if !r.IsError {
				text = "(ok) " + text
			}
			if r.ApprovalRequired != nil {
				var b strings.Builder
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false)
				enc.Encode(r.ApprovalRequired)
				text += "\napprovalRequired: " + b.String()
			}
			golden(t, tt.name, text)
			_, err := os.Stat(asked)
			if (err == nil) != tt.wantAsked {
				t.Errorf("approval command asked = %v, want %v", err == nil, tt.wantAsked)
			}
			_, err = os.Stat(filepath.Join(e.workspace, "out.txt"))
			if (err == nil) != tt.wantRun {
				t.Errorf("command ran = %v, want %v", err == nil, tt.wantRun)
			}
		})
	}
}

// TestStandingMode: bashcall mode stores a session's mode; a call's mode
// is the grant, else the standing mode, else the default.
func TestStandingMode(t *testing.T) {
	e := newConfinedEnv(t, "")
	if r := e.run("", "mode", "-session", "A"); r.stdout != "workspace-write\n" {
		t.Errorf("mode before = %q %s", r.stdout, r.stderr)
	}
	if r := e.run("", "mode", "-session", "A", "read-only"); r.code != 0 || r.stdout != "read-only\n" {
		t.Errorf("mode set = %d %q %s", r.code, r.stdout, r.stderr)
	}
	write := `{"command":"echo x > f && echo wrote","description":"d"}`
	if got := e.call(sessionReq("bash", write, "A")).text(); !strings.Contains(got, markerDenied(modeReadOnly)) {
		t.Errorf("session A = %q, want read-only", got)
	}
	if got := e.call(sessionReq("bash", write, "B")).text(); got != "wrote\n" {
		t.Errorf("session B = %q, want the default mode", got)
	}
	granted := `{"name":"bash","arguments":{"command":"echo x > f && echo wrote","description":"d","sandbox_permissions":"workspace-write","justification":"write f"},"session":{"id":"A"},"approval":"allowed-once"}`
	if got := e.call(granted).text(); got != "wrote\n" {
		t.Errorf("granted = %q", got)
	}
	if got := e.call(sessionReq("bash", write, "A")).text(); !strings.Contains(got, markerDenied(modeReadOnly)) {
		t.Errorf("the grant was stored: %q", got)
	}
	if r := e.run("", "mode", "-session", "A", "default"); r.stdout != "workspace-write\n" {
		t.Errorf("mode cleared = %q", r.stdout)
	}
	if r := e.run("", "mode", "-session", "A", "root"); r.code != 2 {
		t.Errorf("bad mode: exit %d", r.code)
	}
}

// TestEscalationPlanFirst: a call that could not run even if approved is
// refused before anyone is asked.
func TestEscalationPlanFirst(t *testing.T) {
	asked := filepath.Join(testBase, fmt.Sprintf("asked-%d", time.Now().UnixNano()))
	approver := filepath.Join(testBase, fmt.Sprintf("approver-%d", time.Now().UnixNano()))
	os.WriteFile(approver, []byte("#!/bin/sh\necho asked > "+asked+"\necho allowed-once\n"), 0o755)
	e := newConfinedEnv(t, "[sandbox]\nmode = \"read-only\"\n[approval]\ncommand = ["+jsonString(approver)+"]\n")
	req := `{"name":"bash","arguments":{"command":"true","description":"d","sandbox_permissions":"workspace-write","justification":"j"},"session":{"cwd":` + jsonString(e.dir) + `}}`
	if got := e.call(req).text(); !strings.Contains(got, "must not be able to change") {
		t.Errorf("text = %q", got)
	}
	if _, err := os.Stat(asked); err == nil {
		t.Error("the approval command was asked about a call that could not run")
	}
}
