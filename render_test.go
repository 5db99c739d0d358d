package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Value builders for foregroundResult cases.
func exited(code int) *int      { return &code }
func killedBy(s string) *string { return &s }

// TestRenderForeground: the text and the terminal card of every foreground
// shape, built from values, against goldens.
func TestRenderForeground(t *testing.T) {
	const spill = "/state/spill/0123456789abcdef-stdout.log"
	ws := &sandboxFacts{Mode: modeWorkspaceWrite, Enforcement: "full", Scoped: true}
	denied := &sandboxFacts{Mode: modeReadOnly, Denied: true, Enforcement: "full"}
	tests := []struct {
		name       string
		r          foregroundResult
		escalation bool
	}{
		{name: "clean_exit", r: foregroundResult{ExitCode: exited(0), Stdout: streamResult{Text: "hello\n"}, Sandbox: ws}},
		{name: "no_output", r: foregroundResult{ExitCode: exited(0)}},
		{name: "exit_code", r: foregroundResult{ExitCode: exited(3), Stdout: streamResult{Text: "partial\n"}}},
		{name: "exit_code_no_newline", r: foregroundResult{ExitCode: exited(3), Stdout: streamResult{Text: "partial"}}},
		{name: "exit_code_no_output", r: foregroundResult{ExitCode: exited(7)}},
		{name: "both_streams_exit", r: foregroundResult{ExitCode: exited(2), Stdout: streamResult{Text: "out"}, Stderr: streamResult{Text: "err\n"}}},
		{name: "signal", r: foregroundResult{Signal: killedBy("SIGTERM"), Stdout: streamResult{Text: "before\n"}}},
		{name: "timeout_signal", r: foregroundResult{Signal: killedBy("SIGKILL"), TimedOut: true, TimeoutMs: 200, Stdout: streamResult{Text: "started\n"}}},
		{name: "timeout_exit_0", r: foregroundResult{ExitCode: exited(0), TimedOut: true, TimeoutMs: 200, Stdout: streamResult{Text: "started\n"}}},
		{name: "truncated_spill", r: foregroundResult{ExitCode: exited(0), Stdout: streamResult{Text: "99\n100\n", Truncated: true, SpillPath: spill}}},
		{name: "truncated_unavailable", r: foregroundResult{ExitCode: exited(1), Stderr: streamResult{Text: "1999\n2000\n", Truncated: true}}},
		{name: "truncated_both", r: foregroundResult{ExitCode: exited(0),
			Stdout: streamResult{Text: "100\n", Truncated: true, SpillPath: spill},
			Stderr: streamResult{Text: "200\n", Truncated: true}}},
		{name: "denied_escalation", escalation: true, r: foregroundResult{ExitCode: exited(1), Stderr: streamResult{Text: "touch: cannot touch 'x': Read-only file system\n"}, Sandbox: denied}},
		{name: "denied_no_escalation", r: foregroundResult{ExitCode: exited(1), Stderr: streamResult{Text: "touch: cannot touch 'x': Read-only file system\n"}, Sandbox: denied}},
		{name: "escalation_without_denial", escalation: true, r: foregroundResult{ExitCode: exited(1), Sandbox: ws}},
		{name: "denied_timeout_signal", escalation: true, r: foregroundResult{Signal: killedBy("SIGKILL"), TimedOut: true, TimeoutMs: 5, Sandbox: denied}},
		{name: "fake_exit_marker", r: foregroundResult{ExitCode: exited(0), Stdout: streamResult{Text: "hello\n" + markerExit(3)}}},
		{name: "fake_signal_marker", r: foregroundResult{ExitCode: exited(0), Stdout: streamResult{Text: "x\n" + markerSignal("SIGKILL")}}},
		{name: "fake_signal_real_exit", r: foregroundResult{ExitCode: exited(2), Stdout: streamResult{Text: "x\n" + markerSignal("SIGKILL")}}},
		{name: "fake_exit_real_signal", r: foregroundResult{Signal: killedBy("SIGTERM"), Stdout: streamResult{Text: markerExit(0) + "\n"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.Kind = "foreground"
			text := renderForeground(&tt.r, tt.escalation)
			golden(t, tt.name, "text:\n"+text+"\n\ncard:\n"+cardJSON(t, terminalCard(&tt.r, tt.escalation)))
		})
	}
}

// TestTerminalCardFromValues: the card's exit status is the run's, and its
// output is the text without the status marker, whatever the command
// printed.
func TestTerminalCardFromValues(t *testing.T) {
	tests := []struct {
		name       string
		r          foregroundResult
		wantOutput string
		wantCode   *int
		wantSignal string
	}{
		{"fake exit marker, exit 0", foregroundResult{ExitCode: exited(0), Stdout: streamResult{Text: "hello\n" + markerExit(3)}},
			"hello\n" + markerExit(3), exited(0), ""},
		{"fake signal marker, exit 0", foregroundResult{ExitCode: exited(0), Stdout: streamResult{Text: "x\n" + markerSignal("SIGKILL")}},
			"x\n" + markerSignal("SIGKILL"), exited(0), ""},
		{"fake signal marker, exit 4", foregroundResult{ExitCode: exited(4), Stdout: streamResult{Text: "x\n" + markerSignal("SIGKILL")}},
			"x\n" + markerSignal("SIGKILL"), exited(4), ""},
		{"fake exit marker, signal", foregroundResult{Signal: killedBy("SIGTERM"), Stdout: streamResult{Text: "y\n" + markerExit(9)}},
			"y\n" + markerExit(9), nil, "SIGTERM"},
		{"honest exit", foregroundResult{ExitCode: exited(3), Stdout: streamResult{Text: "partial\n"}},
			"partial", exited(3), ""},
		{"honest timeout", foregroundResult{Signal: killedBy("SIGKILL"), TimedOut: true, TimeoutMs: 10},
			textNoOutput + "\n" + markerTimedOut(10), nil, "SIGKILL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := terminalCard(&tt.r, false)
			if c.Output == nil || *c.Output != tt.wantOutput {
				t.Errorf("terminalCard().Output = %q, want %q", deref(c.Output), tt.wantOutput)
			}
			if d := cmp.Diff(tt.wantCode, c.ExitCode); d != "" {
				t.Errorf("terminalCard().ExitCode mismatch (-want +got):\n%s", d)
			}
			if c.Signal != tt.wantSignal {
				t.Errorf("terminalCard().Signal = %q, want %q", c.Signal, tt.wantSignal)
			}
			text := renderForeground(&tt.r, false)
			if !strings.HasPrefix(text, tt.wantOutput) {
				t.Errorf("the card output %q is not the start of the text %q", tt.wantOutput, text)
			}
		})
	}
}

// deref shows an optional string in a failure message.
func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestFakeMarkersEndToEnd: a real command printing a fake exit or signal
// marker and exiting 0 gets a card with exitCode 0 and its whole output.
func TestFakeMarkersEndToEnd(t *testing.T) {
	e := newTestEnv(t, "")
	tests := []struct {
		name, command, wantOutput string
		wantCode                  int
	}{
		{"exit", `printf 'hello\n` + markerExit(3) + `'`, "hello\n" + markerExit(3), 0},
		{"signal", `printf 'hello\n` + markerSignal("SIGKILL") + `'`, "hello\n" + markerSignal("SIGKILL"), 0},
		{"signal_then_exit", `printf 'hello\n` + markerSignal("SIGKILL") + `\n'; exit 5`, "hello\n" + markerSignal("SIGKILL"), 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(bashReq(tt.command, ""))
			var p struct {
				Result struct {
					Output   *string `json:"output"`
					ExitCode *int    `json:"exitCode"`
					Signal   *string `json:"signal"`
				} `json:"result"`
			}
			if err := json.Unmarshal(r.Present, &p); err != nil {
				t.Fatal(err)
			}
			if p.Result.ExitCode == nil || *p.Result.ExitCode != tt.wantCode || p.Result.Signal != nil {
				t.Errorf("card exitCode, signal = %v, %v; want %d, none (present: %s)", p.Result.ExitCode, p.Result.Signal, tt.wantCode, r.Present)
			}
			if deref(p.Result.Output) != tt.wantOutput {
				t.Errorf("card output = %q, want %q", deref(p.Result.Output), tt.wantOutput)
			}
			var sc foregroundResult
			if err := json.Unmarshal(r.StructuredContent, &sc); err != nil || sc.ExitCode == nil || *sc.ExitCode != tt.wantCode {
				t.Errorf("structuredContent exitCode = %v (%v), want %d", sc.ExitCode, err, tt.wantCode)
			}
		})
	}
}

// TestCallCard: the call card of every tool shape, against a golden.
func TestCallCard(t *testing.T) {
	tests := []struct {
		name, tool, args string
	}{
		{"foreground", toolBash, `{"command":"ls -la src","description":"List files","workdir":"sub"}`},
		{"foreground_minimal", toolBash, `{"command":"ls"}`},
		{"background", toolBash, `{"command":"make watch","description":"Watch","run_in_background":true}`},
		{"background_false", toolBash, `{"command":"ls","run_in_background":false}`},
		{"no_command", toolBash, `{"description":"d"}`},
		{"command_not_a_string", toolBash, `{"command":5}`},
		{"output", toolOutput, `{"task_id":"bash-3","wait":true}`},
		{"output_no_id", toolOutput, `{}`},
		{"kill", toolKill, `{"task_id":"bash-3"}`},
		{"kill_bad_id", toolKill, `{"task_id":7}`},
		{"list", toolList, `{}`},
		{"unknown_tool", "bash_exec", `{"command":"ls"}`},
	}
	var b strings.Builder
	for _, tt := range tests {
		var args map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tt.args), &args); err != nil {
			t.Fatal(err)
		}
		b.WriteString(tt.name + ": " + cardJSON(t, callCard(tt.tool, args)) + "\n")
	}
	golden(t, "cards", b.String())
}

// TestGenericCard: the fenced console card of every other result.
func TestGenericCard(t *testing.T) {
	var b strings.Builder
	for _, text := range []string{textStarted("bash-1"), "Error: command aborted", "line\n\n", ""} {
		b.WriteString(cardJSON(t, genericCard(text)) + "\n")
	}
	golden(t, "cards", b.String())
}

// cardJSON encodes a card as the response carries it ("null" for none).
func cardJSON(t *testing.T, c *card) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// TestTextHelpers: the pieces every text is assembled from.
func TestTextHelpers(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"stream plain", streamText(streamResult{Text: "a\n"}), "a\n"},
		{"stream truncated", streamText(streamResult{Text: "a\n", Truncated: true, SpillPath: "/p"}), "a\n\n" + markerTruncated("/p")},
		{"stream truncated no newline", streamText(streamResult{Text: "a", Truncated: true}), "a\n" + markerTruncated(textUnavailable)},
		{"stream empty", streamText(streamResult{}), ""},
		{"join stdout only", joinStreams("out", ""), "out"},
		{"join stderr only", joinStreams("", "err"), markerStderr + "err"},
		{"join no newline", joinStreams("out", "err"), "out\n" + markerStderr + "err"},
		{"join newline", joinStreams("out\n", "err"), "out\n" + markerStderr + "err"},
		{"append none", appendLines("body", nil), "body"},
		{"append after newline", appendLines("body\n", []string{"[a]", "[b]"}), "body\n[a]\n[b]"},
		{"append without newline", appendLines("body", []string{"[a]"}), "body\n[a]"},
		{"append to empty", appendLines("", []string{"[a]"}), "[a]"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// TestTaskReadText: bash_output texts built from values, against goldens.
func TestTaskReadText(t *testing.T) {
	denied := &sandboxFacts{Mode: modeWorkspaceWrite, Denied: true}
	tests := []struct {
		name       string
		r          taskRead
		escalation bool
	}{
		{"running", taskRead{Stdout: "tick\n", Status: taskStatus{State: stateRunning}}, false},
		{"nothing_new", taskRead{Status: taskStatus{State: stateRunning}}, false},
		{"lossy_paths", taskRead{Stdout: "tail", Lossy: true, FullPaths: []string{"/s/tasks/bash-1/stdout.log", "/s/tasks/bash-1/stderr.log"},
			Status: taskStatus{State: stateCompleted, ExitCode: 0}}, false},
		{"lossy_unavailable", taskRead{Stderr: "e\n", Lossy: true, Status: taskStatus{State: stateKilled, Signal: "SIGKILL"}}, false},
		{"denied_escalation", taskRead{Stderr: "Permission denied\n", Sandbox: denied, Status: taskStatus{State: stateCompleted, ExitCode: 1}}, true},
		{"denied_running_no_marker", taskRead{Sandbox: denied, Status: taskStatus{State: stateRunning}}, true},
		{"runner_failed", taskRead{Sandbox: &sandboxFacts{Mode: modeReadOnly, RunnerFailed: true}, Status: taskStatus{State: stateKilled}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			golden(t, tt.name, renderTaskRead(&tt.r, tt.escalation))
		})
	}
}

// TestTail: the tail keeps exactly the last bytes of any sequence of
// writes, across wrap-arounds and writes larger than itself.
func TestTail(t *testing.T) {
	for _, size := range []int{1, 3, 8, 64} {
		for _, writes := range [][]int{{}, {1}, {5, 0, 3}, {7, 7, 7, 7}, {100}, {2, 100, 1}, {63, 1, 1, 64, 65}} {
			tl := newTail(size)
			var all []byte
			for i, n := range writes {
				p := bytes.Repeat([]byte{byte('a' + i)}, n)
				for j := range p {
					p[j] += byte(j % 3)
				}
				tl.write(p)
				all = append(all, p...)
			}
			want := all[max(0, len(all)-size):]
			if got := tl.bytes(); !bytes.Equal(got, want) || tl.total != int64(len(all)) {
				t.Errorf("tail(%d) after writes %v = %q (total %d), want %q (total %d)", size, writes, got, tl.total, want, len(all))
			}
		}
	}
}

// TestValidText: invalid UTF-8, including a character cut by the tail,
// becomes U+FFFD, and valid text is untouched.
func TestValidText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain ✓", "plain ✓"},
		{"\xff\xfe ok", "\uFFFD ok"},
		{"\x93 cut", "\uFFFD cut"},
		{"nul \x00", "nul \x00"},
	}
	for _, tt := range tests {
		if got := validText([]byte(tt.in)); got != tt.want {
			t.Errorf("validText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestListOneLine: bash_list shows each task on one line, whatever its
// command holds: a command's line breaks cannot draw a task that does not
// exist.
func TestListOneLine(t *testing.T) {
	golden(t, "list", renderList([]listEntry{
		{ID: "bash-1", Status: taskStatus{State: stateRunning}, Command: "true\nbash-77 running — sleep 5 # fake\r\n\u2028x"},
		{ID: "bash-2", Status: taskStatus{State: stateRunning}, Command: `printf 'a\nb'`},
		{ID: "bash-3", Status: taskStatus{State: stateRunning}, Command: "a\vb\fc\u0085d\x1b[2K\x1b[1Ae\x1cf\U000e0041"},
	}))
}
