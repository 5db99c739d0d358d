package main

// Requests and responses of PROTOCOL.md sections 2 and 3.
//
// Two kinds of bad input are kept apart. A request a host got wrong (not
// JSON, not an object, over 1 MiB, no string tool name, a malformed session
// or approval) is an invalid request: exit status 2 and an
// "Error: invalid request: <why>" response. Arguments a model got wrong are
// a tool error the model reads: exit status 0 and the contract's message.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
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

// readRequest reads at most maxRequestBytes+1 bytes, so that an oversized
// request is refused without being read whole.
func readRequest(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxRequestBytes+1))
	if err != nil {
		return nil, &invalidRequest{why: "reading the request: " + err.Error()}
	}
	if len(data) > maxRequestBytes {
		return nil, &invalidRequest{why: "the request is over 1 MiB"}
	}
	return data, nil
}

// parseRequest accepts both request shapes of PROTOCOL.md section 2.
func parseRequest(data []byte) (*request, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &invalidRequest{why: "the request is empty; expected a JSON object"}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, &invalidRequest{why: describeJSONError(data, err)}
	}
	if top == nil {
		return nil, &invalidRequest{why: "expected a JSON object, got null"}
	}
	req := &request{Raw: data}
	if id, ok := present(top, "id"); ok {
		if k := jsonKind(id); k != "string" && k != "number" {
			return nil, &invalidRequest{why: "id must be a string or a number, got " + jsonForError(id)}
		}
		req.ID = compactJSON(id)
	}
	fail := func(why string) (*request, error) { return nil, &invalidRequest{why: why, id: req.ID} }
	holder := top
	if fn, ok := present(top, "function"); ok {
		// A fresh map: decoding into top would merge the function object's
		// keys over the host fields, and let a model's "approval" or
		// "session" inside "function" count.
		var nested map[string]json.RawMessage
		if err := json.Unmarshal(fn, &nested); err != nil || nested == nil {
			return fail("function must be an object, got " + jsonForError(fn))
		}
		holder = nested
	}
	name, ok := present(holder, "name")
	if !ok {
		return fail("missing tool name")
	}
	if err := json.Unmarshal(name, &req.Name); err != nil || jsonKind(name) != "string" {
		return fail("the tool name must be a string, got " + jsonForError(name))
	}
	if s, ok := present(top, "session"); ok {
		if err := parseSession(s, &req.Session); err != nil {
			return fail(err.Error())
		}
	}
	if a, ok := present(top, "approval"); ok {
		if json.Unmarshal(a, &req.Approval) != nil || !validApproval(req.Approval) {
			return fail(`approval must be "allowed-once", "rejected" or "cancelled", got ` + jsonForError(a))
		}
	}
	req.Args, req.ArgsErr = parseArguments(holder["arguments"])
	return req, nil
}

// describeJSONError says why data is not one JSON object.
func describeJSONError(data []byte, err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return "expected a JSON object, got " + typeErr.Value
	}
	if !utf8.Valid(data) {
		return "the request is not valid UTF-8 JSON: " + err.Error()
	}
	return "the request is not valid JSON: " + err.Error()
}

func validApproval(s string) bool {
	return s == approvalAllowed || s == approvalRejected || s == approvalCancelled
}

// parseSession reads {"id": "...", "cwd": "..."}; unknown keys are ignored.
func parseSession(raw json.RawMessage, s *session) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fmt.Errorf("session must be an object, got %s", jsonForError(raw))
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"id", &s.ID}, {"cwd", &s.CWD}} {
		v, ok := present(m, f.key)
		if !ok {
			continue
		}
		if jsonKind(v) != "string" || json.Unmarshal(v, f.dst) != nil || *f.dst == "" || strings.ContainsRune(*f.dst, 0) {
			return fmt.Errorf("session.%s must be a non-empty string, got %s", f.key, jsonForError(v))
		}
	}
	return nil
}

// parseArguments accepts an object, a string holding one, or nothing.
func parseArguments(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if isNull(raw) {
		return map[string]json.RawMessage{}, nil
	}
	if jsonKind(raw) == "string" {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, toolErrorf("invalid arguments: expected a JSON object, got %s", jsonForError(raw))
		}
		inner := json.RawMessage(s)
		if !json.Valid(inner) || jsonKind(inner) != "object" {
			return nil, toolErrorf("invalid arguments: expected a string holding a JSON object, got %s", jsonForError(raw))
		}
		raw = inner
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, toolErrorf("invalid arguments: expected a JSON object, got %s", jsonForError(raw))
	}
	return m, nil
}

// present returns m[key] unless it is absent or JSON null: hosts in strict
// structured-output modes send null for an optional field they leave out.
func present(m map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	v, ok := m[key]
	if !ok || isNull(v) {
		return nil, false
	}
	return v, true
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// jsonKind names the JSON type of a valid value.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "undefined"
	}
	switch t[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// maxGotBytes bounds the "got <JSON>" part of an error: a model that sends a
// megabyte in the wrong field should not read it back whole.
const maxGotBytes = 200

// jsonForError renders a value for "got <JSON>": compact JSON, "undefined"
// when the field is missing, cut to maxGotBytes.
func jsonForError(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "undefined"
	}
	s := string(compactJSON(raw))
	if len(s) > maxGotBytes {
		cut := maxGotBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
