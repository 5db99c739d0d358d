package main

// Model-facing text, UI cards and the response line (PROTOCOL.md sections
// 3 and 4).
//
// The rendering is pure: values in, strings out. Each marker is spelled
// once, below, and every text shape has a golden file under testdata/.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Markers and fixed texts of PROTOCOL.md section 4.
const (
	textNoOutput    = "(no output)"
	textNoNewOutput = "(no new output)"
	textNoTasks     = "(no background tasks)"
	textUnavailable = "(unavailable)"
	markerStderr    = "[stderr]\n"
	textErrorPrefix = "Error: " // every error response's text
	markerEscalate  = "[sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"
)

func markerTruncated(path string) string { return "[output truncated; full output: " + path + "]" }
func markerDenied(mode string) string    { return "[sandbox: file access denied under " + mode + " mode]" }
func markerTimedOut(ms int64) string     { return "[timed out after " + strconv.FormatInt(ms, 10) + "ms]" }
func markerSignal(name string) string    { return "[killed by signal: " + name + "]" }
func markerExit(code int) string         { return "[exit code: " + strconv.Itoa(code) + "]" }
func markerDropped(paths string) string {
	return "[some output was dropped from memory; full output: " + paths + "]"
}
func markerNetworkDenied(mode string) string {
	return "[sandbox: network access denied under " + mode + " mode]"
}
func markerReverted(paths []string) string {
	return "[sandbox: reverted changes to protected files: " + strings.Join(paths, ", ") + "]"
}
func markerRestoreFailed(detail string) string {
	return "[sandbox: could not restore protected files: " + detail + "]"
}
func markerRunnerFailed(mode string) string {
	return "[sandbox: the sandbox runner itself failed under " + mode + " mode — the command did not run; this is a sandbox problem, not a command failure]"
}

// sandboxMarkers are the sandbox's lines of a settled run: the denial,
// the protected files put back, then the escalation offer when either
// happened and escalation is advertised.
func sandboxMarkers(sb *sandboxFacts, escalation bool) []string {
	if sb == nil {
		return nil
	}
	var lines []string
	switch {
	case sb.NetworkDenied:
		lines = append(lines, markerNetworkDenied(sb.Mode))
	case sb.Denied:
		lines = append(lines, markerDenied(sb.Mode))
	}
	if len(sb.Reverted) > 0 {
		lines = append(lines, markerReverted(sb.Reverted))
	}
	if sb.RestoreFailed != "" {
		lines = append(lines, markerRestoreFailed(sb.RestoreFailed))
	}
	if len(lines) > 0 && escalation {
		lines = append(lines, markerEscalate)
	}
	return lines
}

// streamText is a stream's tail followed, when truncated, by its marker.
// The newline before the marker is always added, as the seeds specify.
func streamText(s streamResult) string {
	if !s.Truncated {
		return s.Text
	}
	path := s.SpillPath
	if path == "" {
		path = textUnavailable
	}
	return s.Text + "\n" + markerTruncated(path)
}

// joinStreams puts stderr in a "[stderr]" section after stdout, with a
// newline between them only when stdout does not end in one.
func joinStreams(out, errText string) string {
	if errText == "" {
		return out
	}
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return out + markerStderr + errText
}

// appendLines adds each line after body, one per line, with no newline
// after the last.
func appendLines(body string, lines []string) string {
	if len(lines) == 0 {
		return body
	}
	if body != "" && !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return body + strings.Join(lines, "\n")
}

// foregroundLayout is a foreground text in the pieces it is built from:
// the streams (or "(no output)"), the markers, and the exit status marker,
// which always comes last and is "" after a clean exit. The text and the
// terminal card are both built from it, so the card never has to parse a
// text whose body the command controls.
type foregroundLayout struct {
	body    string
	markers []string
	status  string
}

// layoutForeground lays out a foreground run's result.
func layoutForeground(r *foregroundResult, escalation bool) foregroundLayout {
	l := foregroundLayout{body: joinStreams(streamText(r.Stdout), streamText(r.Stderr))}
	if l.body == "" {
		l.body = textNoOutput
	}
	l.markers = sandboxMarkers(r.Sandbox, escalation)
	if r.TimedOut {
		l.markers = append(l.markers, markerTimedOut(r.TimeoutMs))
	}
	switch {
	case r.Signal != nil:
		l.status = markerSignal(*r.Signal)
	case r.ExitCode != nil && *r.ExitCode != 0:
		l.status = markerExit(*r.ExitCode)
	}
	return l
}

// text is the model-facing text: body, markers, then the status marker.
func (l foregroundLayout) text() string {
	lines := l.markers[:len(l.markers):len(l.markers)]
	if l.status != "" {
		lines = append(lines, l.status)
	}
	return appendLines(l.body, lines)
}

// renderForeground is the model-facing text of a foreground run.
func renderForeground(r *foregroundResult, escalation bool) string {
	return layoutForeground(r, escalation).text()
}

// taskStatus is a background task's state, the one shape of it: the model
// sees it in "[status: …]", bash_list and notices; status.json records it.
type taskStatus struct {
	State    string `json:"state"`            // "running", "completed" or "killed"
	ExitCode int    `json:"exitCode"`         // for completed
	Signal   string `json:"signal,omitempty"` // for killed, "" when unknown
}

// String is the status as it appears inside "[status: …]".
func (s taskStatus) String() string {
	switch s.State {
	case stateCompleted:
		return "completed, exit code: " + strconv.Itoa(s.ExitCode)
	case stateKilled:
		if s.Signal != "" {
			return "killed by " + s.Signal
		}
		return "killed"
	}
	return s.State
}

// taskRead is what one bash_output call found.
type taskRead struct {
	Stdout, Stderr string
	Lossy          bool
	FullPaths      []string // complete copies that still exist
	Status         taskStatus
	Sandbox        *sandboxFacts // set once settled
}

// renderTaskRead is the model-facing text of bash_output.
func renderTaskRead(r *taskRead, escalation bool) string {
	body := joinStreams(r.Stdout, r.Stderr)
	if body == "" {
		body = textNoNewOutput
	}
	var lines []string
	if r.Lossy {
		paths := strings.Join(r.FullPaths, ", ")
		if paths == "" {
			paths = textUnavailable
		}
		lines = append(lines, markerDropped(paths))
	}
	if sb := r.Sandbox; sb != nil && r.Status.State != stateRunning {
		if sb.RunnerFailed {
			lines = append(lines, markerRunnerFailed(sb.Mode))
		} else {
			lines = append(lines, sandboxMarkers(sb, escalation)...)
		}
	}
	lines = append(lines, "[status: "+r.Status.String()+"]")
	return appendLines(body, lines)
}

// Texts of the other task tools.

func textStarted(id string) string     { return "started background task " + id }
func textKilled(id string) string      { return "killed background task " + id }
func textAlreadyDone(id string) string { return "task " + id + " had already finished" }
func textNotice(id string, s taskStatus) string {
	return "background bash task " + id + " finished " + s.String() + ". Read its output with bash_output."
}

// listEntry is one line of bash_list.
type listEntry struct {
	ID      string
	Status  taskStatus
	Command string
}

// renderList is the model-facing text of bash_list.
func renderList(entries []listEntry) string {
	if len(entries) == 0 {
		return textNoTasks
	}
	lines := make([]string, len(entries))
	for i, e := range entries {
		lines[i] = e.ID + " " + e.Status.String() + " — " + oneLine(e.Command)
	}
	return strings.Join(lines, "\n")
}

// holdUntilWritten runs release once the response has been written.
func (r *response) holdUntilWritten(release ...func()) { r.held = append(r.held, release...) }

// written releases what the response held; whoever writes it calls this.
func (r *response) written() {
	for _, release := range r.held {
		release()
	}
	r.held = nil
}

// text returns the model-facing text of r.
func (r *response) text() string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// encodeResponse writes r as one line of JSON, with <, > and & unescaped
// so that the text stays readable in logs.
func encodeResponse(w io.Writer, r *response) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encoding the response: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// warmEncoder has encoding/json build its encoders for a foreground
// call's response, which it does at their first use (0.1 ms here): a
// call does it while its command runs.
func warmEncoder() {
	encodeResponse(io.Discard, &response{StructuredContent: &foregroundResult{}, Present: &presentation{}})
}

// Error texts of PROTOCOL.md section 4 (what follows "Error: "), with
// bashcall's additions where the contract has none. Errors that name a
// path or a cause are worded where they arise.

func errInvalidCommand() error { return &toolError{"invalid command: expected a non-empty string"} }
func errCommandNUL() error {
	return &toolError{"invalid command: expected a non-empty string without NUL bytes"}
}
func errInvalidDescription() error {
	return &toolError{"invalid description: expected a non-empty string"}
}
func errInvalidJustification() error {
	return &toolError{"invalid justification: expected a non-empty sentence"}
}
func errEscalationNeedsJustification() error {
	return &toolError{"invalid escalation: sandbox_permissions requires a justification"}
}
func errJustificationAlone() error {
	return &toolError{"invalid escalation: justification is only valid together with sandbox_permissions"}
}

// errExpected is "invalid <field>: expected <what>, got <the JSON sent>".
func errExpected(field, what string, got json.RawMessage) error {
	return &toolError{"invalid " + field + ": expected " + what + ", got " + jsonForError(got)}
}

func errUnknownTool(name string) error { return &toolError{fmt.Sprintf("unknown tool %q", name)} }
func errUnknownTask(id string) error   { return &toolError{fmt.Sprintf("unknown bash task %q", id)} }
func errOtherSession(id string) error {
	return &toolError{"task " + id + " belongs to another session"}
}
func errTaskLimit(limit int64) error {
	return &toolError{fmt.Sprintf("background task limit reached for this session (limit: %d); use bash_kill to stop an unneeded task, wait for one to finish, then retry", limit)}
}
func errBackgroundDisabled() error {
	return &toolError{"run_in_background is disabled by this executor's configuration"}
}
func errNoEscalation() error {
	return &toolError{"sandbox_permissions is not available in this composition (no sandboxing executor to escalate)"}
}
func errNotWider(target, current string) error {
	return &toolError{fmt.Sprintf("sandbox escalation to %q is not strictly wider than this call's current %q mode", target, current)}
}
func errRejected(mode string) error {
	return &toolError{fmt.Sprintf("the user rejected escalating this command to %q", mode)}
}
func errCancelled(mode string) error {
	return &toolError{fmt.Sprintf("approval for escalating to %q was cancelled", mode)}
}
func errNoApprovalChannel(mode string) error {
	return &toolError{fmt.Sprintf("sandbox escalation to %q requires approval, but no approval channel is available", mode)}
}
func errAborted() error { return &toolError{"command aborted"} }
func errGrantChanged() error {
	return &toolError{"refusing to run: the paths withheld from reads resolve elsewhere than when the call was planned (a symlink on the way to one was made or changed while the call waited for its approval); run the command again"}
}

// sandboxUnavailable is the contract's fail-closed error.
func sandboxUnavailable(mode, runnerFailure string) error {
	msg := fmt.Sprintf("sandbox mode %q is requested but no sandbox backend is usable on this host; refusing to run the command unconfined. Use a Linux kernel with Landlock enabled, or set the mode to danger-full-access.", mode)
	if runnerFailure != "" {
		msg += " Runner failure: " + runnerFailure
	}
	return &toolError{msg}
}

// exitFields are a status's exit code and signal as JSON wants them.
func exitFields(s taskStatus) (*int, *string) {
	switch {
	case s.State == stateCompleted:
		code := s.ExitCode
		return &code, nil
	case s.Signal != "":
		sig := s.Signal
		return nil, &sig
	}
	return nil, nil
}
