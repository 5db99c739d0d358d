package main

// Every wire type of PROTOCOL.md sections 2 and 3: the request, the
// response, each tool's structuredContent, the sandbox facts and the UI
// cards. Parsing is request.go; the texts are render.go.
//
// Two kinds of bad input are kept apart. A request a host got wrong (not
// JSON, not an object, over 1 MiB, not UTF-8, a duplicate key at any depth,
// no string tool name, a malformed id, session or approval, a NUL in a host
// field) is an invalid request: exit status 2 and an
// "Error: invalid request: <why>" response. Arguments a model got wrong are
// a tool error the model reads: exit status 0 and the contract's message.

import (
	"encoding/json"
	"fmt"
)

// maxRequestBytes bounds a request (PROTOCOL.md section 2).
const maxRequestBytes = 1 << 20

// Tool names.
const (
	toolBash   = "bash"
	toolOutput = "bash_output"
	toolKill   = "bash_kill"
	toolList   = "bash_list"
)

// Approval answers a host (or an approval program) may give.
const (
	approvalAllowed   = "allowed-once"
	approvalRejected  = "rejected"
	approvalCancelled = "cancelled"
)

// request is one parsed call.
type request struct {
	ID       json.RawMessage // echoed verbatim; nil when absent
	Name     string
	Args     map[string]json.RawMessage
	ArgsErr  error // the arguments were not an object; reported as a tool error
	Session  session
	Approval string
	Raw      []byte
}

// session is the host's view of who is calling: an opaque owner token and
// a workspace. Both may be empty.
type session struct {
	ID  string
	CWD string
}

// invalidRequest is a request the host got wrong (exit status 2).
type invalidRequest struct {
	why string
	id  json.RawMessage
}

func (e *invalidRequest) Error() string { return "invalid request: " + e.why }

// toolError is a failure the model reads as "Error: <msg>".
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func toolErrorf(format string, args ...any) error {
	return &toolError{fmt.Sprintf(format, args...)}
}

// shape is where one request shape keeps the tool name, the arguments and
// the id the host wants back.
type shape struct {
	nested string // "function": name and arguments are inside this object
	args   string // the key of the arguments
	id     string // the key of the id echoed back
}

// Request shapes by "type" (PROTOCOL.md section 2).
var (
	shapeMCP          = shape{args: "arguments", id: "id"}
	shapeOpenAI       = shape{nested: "function", args: "arguments", id: "id"}
	shapeAnthropic    = shape{args: "input", id: "id"}          // a tool_use block
	shapeFunctionCall = shape{args: "arguments", id: "call_id"} // a Responses API item
)

// maxSessionIDBytes bounds session.id (PROTOCOL.md section 2): it is an
// opaque token, not a place to store data.
const maxSessionIDBytes = 256

// maxGotBytes bounds the "got <JSON>" part of an error: a model that sends a
// megabyte in the wrong field should not read it back whole.
const maxGotBytes = 200

// streamResult is one collected stream of a foreground run.
type streamResult struct {
	Text      string `json:"text"`
	Truncated bool   `json:"truncated"`
	SpillPath string `json:"spillPath,omitempty"`
}

// sandboxFacts are the facts a confined (or unconfined) run executed under.
// A key that does not apply is absent, not false (PROTOCOL.md section 3).
type sandboxFacts struct {
	Mode         string `json:"mode"`
	Denied       bool   `json:"denied"`
	Enforcement  string `json:"enforcement,omitempty"`
	Scoped       bool   `json:"scoped,omitempty"`
	RunnerFailed bool   `json:"runnerFailed,omitempty"`
	// Network is "on" or "off" in confined modes (PROTOCOL.md section 7);
	// NetworkDenied says the command failed for want of it.
	Network       string `json:"network,omitempty"`
	NetworkDenied bool   `json:"networkDenied,omitempty"`
	// Reverted lists protected files the command changed and bashcall
	// put back; RestoreFailed says why one could not be.
	Reverted      []string `json:"reverted,omitempty"`
	RestoreFailed string   `json:"restoreFailed,omitempty"`
}

// foregroundResult is the structuredContent of a foreground run.
type foregroundResult struct {
	Kind      string        `json:"kind"`
	ExitCode  *int          `json:"exitCode"`
	Signal    *string       `json:"signal"`
	TimedOut  bool          `json:"timedOut"`
	Aborted   bool          `json:"aborted"`
	TimeoutMs int64         `json:"timeoutMs"`
	Stdout    streamResult  `json:"stdout"`
	Stderr    streamResult  `json:"stderr"`
	Sandbox   *sandboxFacts `json:"sandbox,omitempty"`
}

// response is one answer, MCP's CallToolResult plus fields of our own.
type response struct {
	ID                json.RawMessage   `json:"id,omitempty"`
	Name              string            `json:"name,omitempty"`
	IsError           bool              `json:"isError"`
	Content           []textContent     `json:"content"`
	StructuredContent any               `json:"structuredContent,omitempty"`
	Present           *presentation     `json:"present,omitempty"`
	Notices           []string          `json:"notices,omitempty"`
	ApprovalRequired  *approvalRequired `json:"approvalRequired,omitempty"`

	// held are released once the response is written: they keep the
	// spill files it offers live until then.
	held []func()
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type approvalRequired struct {
	Mode          string `json:"mode"`
	Justification string `json:"justification"`
	Command       string `json:"command"`
	Reason        string `json:"reason"`
}

// presentation holds the UI cards of the seeds' "UI presentation" section.
type presentation struct {
	Call   *card `json:"call,omitempty"`
	Result *card `json:"result,omitempty"`
}

type card struct {
	Card        string        `json:"card"`
	Title       string        `json:"title,omitempty"`
	Description string        `json:"description,omitempty"`
	Cwd         string        `json:"cwd,omitempty"`
	Kind        string        `json:"kind,omitempty"`
	RawInput    string        `json:"rawInput,omitempty"`
	Content     []textContent `json:"content,omitempty"`
	Output      *string       `json:"output,omitempty"`
	ExitCode    *int          `json:"exitCode,omitempty"`
	Signal      string        `json:"signal,omitempty"`
}

// backgroundResult is the structuredContent of a background start.
type backgroundResult struct {
	Kind   string `json:"kind"`
	TaskID string `json:"taskId"`
}

// taskOutputResult is the structuredContent of bash_output.
type taskOutputResult struct {
	Kind       string        `json:"kind"`
	TaskID     string        `json:"taskId"`
	Status     string        `json:"status"`
	ExitCode   *int          `json:"exitCode"`
	Signal     *string       `json:"signal"`
	Stdout     string        `json:"stdout"`
	Stderr     string        `json:"stderr"`
	Lossy      bool          `json:"lossy"`
	FullOutput []string      `json:"fullOutput,omitempty"`
	Sandbox    *sandboxFacts `json:"sandbox,omitempty"`
}

// taskKillResult is the structuredContent of bash_kill.
type taskKillResult struct {
	Kind   string `json:"kind"`
	TaskID string `json:"taskId"`
	Killed bool   `json:"killed"`
}

// taskListResult is the structuredContent of bash_list.
type taskListResult struct {
	Kind  string          `json:"kind"`
	Tasks []taskListEntry `json:"tasks"`
}

type taskListEntry struct {
	TaskID   string  `json:"taskId"`
	Status   string  `json:"status"`
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
	Command  string  `json:"command"`
}
