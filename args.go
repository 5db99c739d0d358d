package main

// The arguments a model sends, validated into the values a tool uses
// (PROTOCOL.md section 4: the error texts and the validation order).

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Argument readers. Each returns ok=false when the value has the wrong type.

func argString(args map[string]json.RawMessage, key string) (s string, set, ok bool) {
	v, set := present(args, key)
	if !set {
		return "", false, true
	}
	if jsonKind(v) != "string" || json.Unmarshal(v, &s) != nil {
		return "", true, false
	}
	return s, true, true
}

func argBool(args map[string]json.RawMessage, key string) (b, set, ok bool) {
	v, set := present(args, key)
	if !set {
		return false, false, true
	}
	if jsonKind(v) != "boolean" || json.Unmarshal(v, &b) != nil {
		return false, true, false
	}
	return b, true, true
}

// argPositive reads a positive, finite number of milliseconds, rounded up to
// a whole millisecond.
func argPositive(args map[string]json.RawMessage, key string) (ms int64, set, ok bool) {
	v, set := present(args, key)
	if !set {
		return 0, false, true
	}
	if jsonKind(v) != "number" {
		return 0, true, false
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, true, false
	}
	if f > math.MaxInt32 {
		return math.MaxInt32, true, true
	}
	return int64(math.Ceil(f)), true, true
}

// bashArgs are the validated arguments of a bash call.
type bashArgs struct {
	Command       string
	Description   string
	TimeoutMs     int64 // 0 when absent
	Workdir       string
	Background    bool
	Escalate      string // sandbox_permissions, "" when absent
	Justification string
}

// parseBashArgs validates in schema order, then the escalation pairing
// (PROTOCOL.md section 4, "Validation order").
func parseBashArgs(args map[string]json.RawMessage) (bashArgs, error) {
	var a bashArgs
	var set, ok bool
	if a.Command, _, ok = argString(args, "command"); !ok || strings.TrimSpace(a.Command) == "" {
		return a, errInvalidCommand()
	}
	if strings.ContainsRune(a.Command, 0) {
		return a, errCommandNUL()
	}
	if a.Description, _, ok = argString(args, "description"); !ok || strings.TrimSpace(a.Description) == "" {
		return a, errInvalidDescription()
	}
	if a.TimeoutMs, _, ok = argPositive(args, "timeoutMs"); !ok {
		return a, errExpected("timeoutMs", "a positive number", args["timeoutMs"])
	}
	if a.Workdir, _, ok = argString(args, "workdir"); !ok {
		return a, errExpected("workdir", "a string", args["workdir"])
	}
	if a.Background, _, ok = argBool(args, "run_in_background"); !ok {
		return a, errExpected("run_in_background", "a boolean", args["run_in_background"])
	}
	if a.Escalate, _, ok = argString(args, "sandbox_permissions"); !ok || (a.Escalate != "" && !escalationTarget(a.Escalate)) {
		return a, errExpected("sandbox_permissions", `"workspace-write" or "danger-full-access"`, args["sandbox_permissions"])
	}
	var hasJustification bool
	if a.Justification, hasJustification, ok = argString(args, "justification"); !ok || (hasJustification && !isSentence(a.Justification)) {
		return a, errInvalidJustification()
	}
	_, set, _ = argString(args, "sandbox_permissions")
	switch {
	case set && !hasJustification:
		return a, errEscalationNeedsJustification()
	case hasJustification && !set:
		return a, errJustificationAlone()
	}
	return a, nil
}

// escalationTarget reports whether m may be asked for with sandbox_permissions.
func escalationTarget(m string) bool {
	return m == modeWorkspaceWrite || m == modeFullAccess
}

// taskArgs are the arguments of bash_output and bash_kill.
type taskArgs struct {
	TaskID    string
	Wait      bool
	TimeoutMs int64 // 0 when absent
}

// parseTaskArgs validates task_id and, for bash_output, wait and timeout_ms.
func parseTaskArgs(args map[string]json.RawMessage, withWait bool) (taskArgs, error) {
	var a taskArgs
	var set, ok bool
	if a.TaskID, set, ok = argString(args, "task_id"); !ok || !set {
		return a, errExpected("task_id", "a string", args["task_id"])
	}
	if !withWait {
		return a, nil
	}
	if a.Wait, _, ok = argBool(args, "wait"); !ok {
		return a, errExpected("wait", "a boolean", args["wait"])
	}
	if a.TimeoutMs, _, ok = argPositive(args, "timeout_ms"); !ok {
		return a, errExpected("timeout_ms", "a positive number", args["timeout_ms"])
	}
	return a, nil
}
