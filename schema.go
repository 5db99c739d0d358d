package main

// The tool definitions a model sees, and the system-prompt section. The
// descriptions are the seeds' (PROTOCOL.md section 2), in bashcall's
// vocabulary: tasks, bash_output, bash_kill, bash_list, $BASHCALL_*.

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

const descBashBase = "Execute a bash command (`bash -c`) and return its stdout/stderr. Each call runs in a fresh shell: no state (cwd, variables, functions) persists between calls — pass `workdir` instead of using `cd`. Non-zero exits are reported as `[exit code: N]`. Current environment facts are exposed through managed `$BASHCALL_*` variables; inspect them when needed. Commands may run under a file sandbox; a blocked file operation is reported as `[sandbox: file access denied under <mode> mode]` — a policy denial, not a bug in the command; do not retry another way. Long output is truncated to its tail; the full output is saved to a file whose path is reported when available."

const descBashBackground = " Set `run_in_background: true` for long-running commands: the call returns a task id immediately; read its output with `bash_output` and stop it with `bash_kill`."

const descBashNoBackground = " Background execution is not available; long-running commands must finish within the timeout."

const descEscalation = " Attempting a command the sandbox may deny is safe and expected: run it and read the marker rather than assuming the denial. When a command is denied and a wider mode would let it succeed, escalate immediately in the same turn — the one sanctioned exception to a denial: retry the exact same command once with `sandbox_permissions` (the narrowest wider mode that suffices) plus a one-sentence `justification`. Do not detour through chat to ask permission first — the approval prompt raised by that retry is how the user consents. If the session states approval prompts are disabled, there is no exception: a denial is final — do not set `sandbox_permissions`. Never escalate speculatively: ground the request in a real denial — normally the one this command just hit; escalating up front is fine only when this session already denied the same access. A rejected escalation is final for that command — stop and explain, never work around it — but it does not forbid attempting or escalating other commands later."

const promptBash = "Check the [exit code: N] marker on every bash result; investigate failures before moving on."

const promptTasks = "Track every background task id you start. You are notified in-session when a task finishes — do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running task's work. Before giving a final answer, collect every still-relevant task with bash_output (set wait: true only when you are genuinely blocked on it), and bash_kill tasks that stopped mattering."

// property is one parameter of a tool.
type property struct {
	name, typ, desc string
	enum            []string
	required        bool
}

// toolDef is one tool.
type toolDef struct {
	name, desc string
	props      []property
}

// systemPrompt is the prompt section for this configuration.
func systemPrompt(cfg *config) string {
	if cfg.Background.Enabled {
		return promptBash + "\n\n" + promptTasks + "\n"
	}
	return promptBash + "\n"
}

// schemaFormats are the shapes "bashcall schema -format" prints: MCP's
// tools/list result, OpenAI function tools, Anthropic tools.
var schemaFormats = []string{"mcp", "openai", "anthropic"}

// validSchemaFormat reports whether f is one of schemaFormats.
func validSchemaFormat(f string) bool {
	return slices.Contains(schemaFormats, f)
}

// schemaJSON renders the definitions in a format of schemaFormats, one
// tool a line, properties in schema order.
func schemaJSON(defs []toolDef, format string) []byte {
	var b bytes.Buffer
	open, end := "[", "\n]\n"
	if format == "mcp" {
		open, end = `{"tools":[`, "\n]}\n"
	}
	b.WriteString(open)
	for i, d := range defs {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  " + toolJSON(d, format))
	}
	b.WriteString(end)
	return b.Bytes()
}

// toolJSON is one tool definition: an MCP Tool (with the outputSchema its
// structuredContent follows), an OpenAI function tool, or an Anthropic tool.
func toolJSON(d toolDef, format string) string {
	head := `"name":` + jsonString(d.name) + `,"description":` + jsonString(d.desc)
	params := inputSchema(d.props)
	switch format {
	case "openai":
		return `{"type":"function","function":{` + head + `,"parameters":` + params + `}}`
	case "anthropic":
		return `{` + head + `,"input_schema":` + params + `}`
	}
	return `{` + head + `,"inputSchema":` + params + `,"outputSchema":` + outputSchema(d.name) + `}`
}

// inputSchema is a JSON Schema object; there is no additionalProperties:
// false, as unknown keys are ignored, never refused.
func inputSchema(props []property) string {
	var fields, required []string
	for _, p := range props {
		f := `"type":` + jsonString(p.typ)
		if len(p.enum) > 0 {
			e, _ := json.Marshal(p.enum)
			f += `,"enum":` + string(e)
		}
		f += `,"description":` + jsonString(p.desc)
		fields = append(fields, jsonString(p.name)+":{"+f+"}")
		if p.required {
			required = append(required, jsonString(p.name))
		}
	}
	return `{"type":"object","properties":{` + strings.Join(fields, ",") + `},"required":[` + strings.Join(required, ",") + `]}`
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// Pieces of the output schemas.
const (
	outString    = `{"type":"string"}`
	outBoolean   = `{"type":"boolean"}`
	outInteger   = `{"type":"integer"}`
	outExitCode  = `{"type":["integer","null"]}`
	outSignal    = `{"type":["string","null"]}`
	outStream    = `{"type":"object","properties":{"text":{"type":"string"},"truncated":{"type":"boolean"},"spillPath":{"type":"string"}},"required":["text","truncated"]}`
	outSandbox   = `{"type":"object","properties":{"mode":{"type":"string","enum":["read-only","workspace-write","danger-full-access"]},"denied":{"type":"boolean"},"enforcement":{"type":"string","enum":["full","partial"]},"scoped":{"type":"boolean"},"network":{"type":"string","enum":["on","off"]},"networkDenied":{"type":"boolean"},"runnerFailed":{"type":"boolean"},"reverted":{"type":"array","items":{"type":"string"}},"restoreFailed":{"type":"string"}},"required":["mode","denied"]}`
	outTaskEntry = `{"type":"object","properties":{"taskId":{"type":"string"},"status":{"type":"string"},"exitCode":{"type":["integer","null"]},"signal":{"type":["string","null"]},"command":{"type":"string"}},"required":["taskId","status","command"]}`
)

// outputSchema describes a tool's structuredContent (PROTOCOL.md section
// 3), for MCP clients that check it. It lists what a result carries and
// requires only what every result has, with no additionalProperties: false,
// so a client never refuses a result for a key that does not apply. It is
// built when asked for, not at start: a call never prints it.
func outputSchema(tool string) string {
	switch tool {
	case toolBash:
		return outObject([]string{"kind"},
			"kind", `{"type":"string","enum":["foreground","background"]}`,
			"taskId", outString, "exitCode", outExitCode, "signal", outSignal,
			"timedOut", outBoolean, "aborted", outBoolean, "timeoutMs", outInteger,
			"stdout", outStream, "stderr", outStream, "sandbox", outSandbox)
	case toolOutput:
		return outObject([]string{"kind", "taskId", "status", "stdout", "stderr", "lossy"},
			"kind", `{"type":"string","enum":["taskOutput"]}`,
			"taskId", outString, "status", outString, "exitCode", outExitCode, "signal", outSignal,
			"stdout", outString, "stderr", outString, "lossy", outBoolean,
			"fullOutput", `{"type":"array","items":{"type":"string"}}`, "sandbox", outSandbox)
	case toolKill:
		return outObject([]string{"kind", "taskId", "killed"},
			"kind", `{"type":"string","enum":["taskKill"]}`, "taskId", outString, "killed", outBoolean)
	case toolList:
		return outObject([]string{"kind", "tasks"},
			"kind", `{"type":"string","enum":["taskList"]}`, "tasks", `{"type":"array","items":`+outTaskEntry+`}`)
	}
	panic("unreachable: no output schema for " + tool)
}

// outObject is an object schema from name, schema pairs, in that order.
func outObject(required []string, pairs ...string) string {
	var fields []string
	for i := 0; i+1 < len(pairs); i += 2 {
		fields = append(fields, jsonString(pairs[i])+":"+pairs[i+1])
	}
	req, _ := json.Marshal(required)
	return `{"type":"object","properties":{` + strings.Join(fields, ",") + `},"required":` + string(req) + `}`
}
