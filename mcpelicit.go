package main

// Approval of an escalation through MCP elicitation: when a call needs a
// person's answer and the client declared the elicitation capability (form
// mode), bashcall mcp asks with elicitation/create and runs the call again
// with the request's "approval" set from the answer.

import (
	"encoding/json"
	"fmt"
	"strings"
)

// approvalSchema is the form an elicitation asks the person to fill: one
// choice, allow once or reject. enumNames is the 2025-06-18 way of naming
// the choices, which later revisions still accept.
const approvalSchema = `{"type":"object","properties":{"decision":{"type":"string","title":"Run this command once with the wider sandbox mode?","enum":["allow-once","reject"],"enumNames":["Allow once","Reject"]}},"required":["decision"]}`

// elicit asks the person, through the client, whether the escalation may
// run once; "" when the call was aborted before an answer came.
func (c *mcpCall) elicit(ar *approvalRequired) string {
	s := c.s
	s.mu.Lock()
	s.asks++
	id := json.RawMessage(jsonString(fmt.Sprintf("bashcall-%d", s.asks)))
	answer := make(chan *rpcMessage, 1)
	s.asked[string(id)] = answer
	s.mu.Unlock()
	s.send(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  any             `json:"params"`
	}{"2.0", id, "elicitation/create", map[string]any{
		"message":         approvalMessage(ar),
		"requestedSchema": json.RawMessage(approvalSchema),
	}})
	select {
	case m := <-answer:
		return approvalAnswer(m)
	case <-c.stop:
		s.mu.Lock()
		delete(s.asked, string(id))
		s.mu.Unlock()
		s.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": "the tool call was cancelled"})
		return ""
	}
}

// approvalAnswer maps an elicitation result to the request's approval:
// only an accepted "allow-once" allows; a decline rejects; a cancel, an
// error or anything unexpected cancels.
func approvalAnswer(m *rpcMessage) string {
	var r struct {
		Action  string `json:"action"`
		Content struct {
			Decision string `json:"decision"`
		} `json:"content"`
	}
	if !isNull(m.err) || json.Unmarshal(m.result, &r) != nil {
		return approvalCancelled
	}
	switch r.Action {
	case "accept":
		if r.Content.Decision == "allow-once" {
			return approvalAllowed
		}
		return approvalRejected
	case "decline":
		return approvalRejected
	}
	return approvalCancelled
}

// approvalMessage is what the person is asked: the reason (one line: a
// justification holds no line break), then the command, last, with its
// count of lines and every rune that would not show as itself escaped.
func approvalMessage(ar *approvalRequired) string {
	lines := strings.Count(ar.Command, "\n") + 1
	unit := "lines"
	if lines == 1 {
		unit = "line"
	}
	return fmt.Sprintf("%s\n\nCommand (%d %s):\n%s", ar.Reason, lines, unit, displayCommand(ar.Command))
}
