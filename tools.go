package main

// The tool table: every tool bashcall offers, with its definition (which
// depends on the configuration), its handler and its call card, in one
// place. Dispatch, schema (and so the MCP server's tools/list) and the UI
// cards all read it, so a new tool is one entry, its handler, its render
// function and their goldens.

import "encoding/json"

// toolSpec is one tool.
type toolSpec struct {
	name string
	// def is the tool's definition for a configuration; ok false when
	// the configuration does not offer the tool.
	def    func(cfg *config) (d toolDef, ok bool)
	handle func(inv *invocation, req *request, resp *response) error
	card   func(args map[string]json.RawMessage) *card
}

// toolTable lists the tools in the order a model sees them.
var toolTable = []toolSpec{
	{name: toolBash, def: bashDef, handle: (*invocation).bash, card: bashCard},
	{name: toolOutput, def: taskToolDef(outputDef), handle: (*invocation).taskOutput, card: taskOutputCard},
	{name: toolKill, def: taskToolDef(killDef), handle: (*invocation).taskKill, card: taskKillCard},
	{name: toolList, def: taskToolDef(listDef), handle: (*invocation).taskList, card: taskListCard},
}

// lookupTool finds a tool of the table by name.
func lookupTool(name string) (*toolSpec, bool) {
	for i := range toolTable {
		if toolTable[i].name == name {
			return &toolTable[i], true
		}
	}
	return nil, false
}

// tools are the definitions for this configuration: run_in_background and
// the task tools only when background tasks are enabled, the escalation
// fields and paragraph only when the executor sandboxes.
func tools(cfg *config) []toolDef {
	var defs []toolDef
	for _, t := range toolTable {
		if d, ok := t.def(cfg); ok {
			defs = append(defs, d)
		}
	}
	return defs
}

// bashDef is the bash tool for a configuration.
func bashDef(cfg *config) (toolDef, bool) {
	sandboxes := cfg.Sandbox.Mode != modeFullAccess
	bg := cfg.Background.Enabled
	bash := toolDef{name: toolBash, desc: descBashBase, props: []property{
		{name: "command", typ: "string", required: true, desc: "The bash command to execute."},
		{name: "description", typ: "string", required: true, desc: `Clear, concise description of what this command does in active voice, 5-10 words (shown in the UI). Examples: "ls" → "List files in current directory"; "git status" → "Show working tree status"; "npm install" → "Install package dependencies".`},
		{name: "timeoutMs", typ: "number", desc: "Timeout in milliseconds. The executor applies its configured default and cap, and kills the command on expiry."},
		{name: "workdir", typ: "string", desc: "Working directory for this command. Defaults to the session workspace; a relative path is resolved against it."},
	}}
	if bg {
		bash.desc += descBashBackground
		bash.props = append(bash.props, property{name: "run_in_background", typ: "boolean",
			desc: "Run in the background and return a task id immediately (collect with bash_output, stop with bash_kill). No timeout applies."})
	} else {
		bash.desc += descBashNoBackground
	}
	if sandboxes {
		bash.desc += descEscalation
		bash.props = append(bash.props,
			property{name: "sandbox_permissions", typ: "string", enum: []string{modeWorkspaceWrite, modeFullAccess},
				desc: "The wider sandbox mode this command needs. Only valid as a one-shot retry of a command the sandbox just denied; requires justification and user approval."},
			property{name: "justification", typ: "string",
				desc: "Required with sandbox_permissions: one sentence for the user explaining why this exact command needs the wider access."})
	}
	return bash, true
}

// taskToolDef offers a task tool only when background tasks are enabled.
func taskToolDef(d toolDef) func(*config) (toolDef, bool) {
	return func(cfg *config) (toolDef, bool) { return d, cfg.Background.Enabled }
}

var taskIDProp = property{name: "task_id", typ: "string", required: true, desc: "Task id returned by bash when it started the background task."}

var outputDef = toolDef{name: toolOutput, desc: "Read new output from a background bash task started with `bash` + `run_in_background`. Returns only output produced since the previous bash_output call, plus the task status; every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits until the task finishes or the timeout passes.",
	props: []property{taskIDProp,
		{name: "wait", typ: "boolean", desc: "Block until the task reaches a terminal status or the timeout expires. A timed-out wait returns [status: running] and leaves the task alive."},
		{name: "timeout_ms", typ: "number", desc: "Max wait in milliseconds (only meaningful with wait: true). Defaults to the configured wait timeout; capped by the configured maximum."},
	}}

var killDef = toolDef{name: toolKill, desc: "Ask the executor to kill a running background bash task by task id.", props: []property{taskIDProp}}

var listDef = toolDef{name: toolList, desc: "List your background tasks (running and finished) with their ids and statuses."}
