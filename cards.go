package main

import (
	"encoding/json"
	"strings"
)

// The UI cards of a response (PROTOCOL.md section 3, "present"): the call
// card of each tool and the result cards, built from values, never from
// rendered text.

// callCard is the card for a call, or nil when its arguments are unusable.
func callCard(tool string, args map[string]json.RawMessage) *card {
	if t, ok := lookupTool(tool); ok {
		return t.card(args)
	}
	return nil
}

// bashCard is the bash tool's call card: a terminal for a foreground
// call, a generic card for a background start.
func bashCard(args map[string]json.RawMessage) *card {
	str := func(k string) string { s, _, _ := argString(args, k); return s }
	if str("command") == "" {
		return nil
	}
	if bg, _, _ := argBool(args, "run_in_background"); bg {
		return &card{Card: "generic", Title: str("command"), Kind: "execute", RawInput: str("command"),
			Content: []textContent{{Type: "text", Text: str("description")}}}
	}
	return &card{Card: "terminal", Title: str("command"), Description: str("description"), Cwd: str("workdir")}
}

// taskCard is a task tool's call card, titled by the task id.
func taskCard(args map[string]json.RawMessage, title, kind string) *card {
	id, _, _ := argString(args, "task_id")
	if id == "" {
		return nil
	}
	return &card{Card: "generic", Title: title + id, Kind: kind, RawInput: id}
}

func taskOutputCard(args map[string]json.RawMessage) *card {
	return taskCard(args, "Read output from background task ", "read")
}

func taskKillCard(args map[string]json.RawMessage) *card {
	return taskCard(args, "Kill background task ", "execute")
}

func taskListCard(map[string]json.RawMessage) *card {
	return &card{Card: "generic", Title: "List background tasks", Kind: "read"}
}

// terminalCard is the result card of a foreground run, built from the
// run's values, never by parsing its text: a command that prints
// "[exit code: 3]" and exits 0 gets exitCode 0 and keeps every byte of its
// output. The output is the model-facing text without the status marker
// and the line break before it (so that it ends where the marker's line
// began); every other marker stays.
func terminalCard(r *foregroundResult, escalation bool) *card {
	l := layoutForeground(r, escalation)
	out := appendLines(l.body, l.markers)
	if l.status != "" {
		out = strings.TrimSuffix(out, "\n")
	}
	c := &card{Card: "terminal", Output: &out}
	switch {
	case r.Signal != nil:
		c.Signal = *r.Signal
	case r.ExitCode != nil:
		code := *r.ExitCode
		c.ExitCode = &code
	}
	return c
}

// genericCard fences a text as console output.
func genericCard(text string) *card {
	return &card{Card: "generic", Content: []textContent{{Type: "text",
		Text: "```console\n" + strings.TrimRight(text, "\n") + "\n```"}}}
}
