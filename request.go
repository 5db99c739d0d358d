package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Reading and parsing one request (PROTOCOL.md section 2): its size, its
// shape (the four tool-call shapes of the model APIs), the host fields
// read from the top level only, and the JSON helpers the messages use.
// The types are in protocol.go.

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

// parseRequest accepts the request shapes of PROTOCOL.md section 2. The
// request is checked whole first (UTF-8, no duplicate key at any depth),
// then the shape is chosen by "type", then the fields are read: host fields
// (id, session, approval) from the top level only, the tool name and the
// arguments from where the shape keeps them.
func parseRequest(data []byte) (*request, error) {
	top, err := decodeRequest(data)
	if err != nil {
		return nil, err
	}
	sh, err := shapeOf(top)
	if err != nil {
		return nil, &invalidRequest{why: err.Error()}
	}
	req := &request{Raw: data}
	if req.ID, err = responseID(top, sh); err != nil {
		return nil, &invalidRequest{why: err.Error()}
	}
	fail := func(why string) (*request, error) { return nil, &invalidRequest{why: why, id: req.ID} }
	holder := top
	if fn, ok := present(top, sh.nested); sh.nested != "" && ok {
		// A fresh map: decoding into top would merge the nested object's
		// keys over the host fields, and let a model's "approval" or
		// "session" inside "function" count.
		var nested map[string]json.RawMessage
		if err := json.Unmarshal(fn, &nested); err != nil || nested == nil {
			return fail(sh.nested + " must be an object, got " + jsonForError(fn))
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
	req.Args, req.ArgsErr = parseArguments(holder[sh.args], sh.argsPath())
	var ir *invalidRequest
	if errors.As(req.ArgsErr, &ir) {
		return fail(ir.why)
	}
	return req, nil
}

// decodeRequest reads the top-level object of a request that is one JSON
// object, valid UTF-8 throughout, without a duplicate key at any depth.
// None of these failures echoes an id, but for a duplicate key inside an
// object of the request: nothing else of such a request is read.
func decodeRequest(data []byte) (map[string]json.RawMessage, error) {
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
	if at := invalidUTF8At(data); at >= 0 {
		return nil, &invalidRequest{why: fmt.Sprintf("the request is not valid UTF-8 (byte offset %d)", at)}
	}
	if err := duplicateKey(data, ""); err != nil {
		// One inside an object leaves the request's own keys, the id
		// among them, read cleanly: the id is echoed.
		var id json.RawMessage
		if dup, ok := err.(*duplicateKeyError); ok && !dup.top {
			if sh, serr := shapeOf(top); serr == nil {
				if rid, rerr := responseID(top, sh); rerr == nil {
					id = rid
				}
			}
		}
		return nil, &invalidRequest{why: err.Error(), id: id}
	}
	return top, nil
}

// argsPath names the arguments in messages.
func (s shape) argsPath() string {
	if s.nested != "" {
		return s.nested + "." + s.args
	}
	return s.args
}

// shapeOf chooses the shape. Without a "type" (hosts often drop it), a
// "function" object makes it the OpenAI shape. An unknown type is refused
// rather than guessed at: a host and bashcall must agree on which object
// holds the arguments.
func shapeOf(top map[string]json.RawMessage) (shape, error) {
	t, ok := present(top, "type")
	if !ok {
		if _, fn := present(top, "function"); fn {
			return shapeOpenAI, nil
		}
		return shapeMCP, nil
	}
	var s string
	if jsonKind(t) != "string" || json.Unmarshal(t, &s) != nil {
		return shape{}, fmt.Errorf("type must be a string, got %s", jsonForError(t))
	}
	switch s {
	case "function":
		if _, fn := present(top, "function"); fn {
			return shapeOpenAI, nil
		}
		return shapeMCP, nil
	case "tool_use":
		return shapeAnthropic, nil
	case "function_call":
		return shapeFunctionCall, nil
	}
	return shape{}, fmt.Errorf(`unknown request type %s: expected "function", "tool_use" or "function_call"`, jsonForError(t))
}

// responseID is the id echoed back: "id", or for a Responses API
// function_call item its "call_id" (the item's own "id", "fc_...", names
// the output item, not the call), falling back to "id" without one. Every
// id field present is checked, used or not: each is a host field.
func responseID(top map[string]json.RawMessage, sh shape) (json.RawMessage, error) {
	id, err := hostID(top, "id")
	if err != nil || sh.id == "id" {
		return id, err
	}
	callID, err := hostID(top, sh.id)
	if err != nil || callID == nil {
		return id, err
	}
	return callID, nil
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
		if jsonKind(v) != "string" {
			return fmt.Errorf("session.%s must be a non-empty string, got %s", f.key, jsonForError(v))
		}
		if err := hostString("session."+f.key, v, f.dst); err != nil {
			return err
		}
		if *f.dst == "" {
			return fmt.Errorf("session.%s must be a non-empty string, got %s", f.key, jsonForError(v))
		}
	}
	if len(s.ID) > maxSessionIDBytes {
		return fmt.Errorf("session.id must be at most %d bytes, got %d", maxSessionIDBytes, len(s.ID))
	}
	return nil
}

// parseArguments accepts an object, a string holding one, or nothing. A
// malformed value is a tool error the model reads; a duplicate key inside
// a string is an invalid request like one anywhere else (where names the
// arguments in that message).
func parseArguments(raw json.RawMessage, where string) (map[string]json.RawMessage, error) {
	if isNull(raw) {
		return map[string]json.RawMessage{}, nil
	}
	if jsonKind(raw) == "string" {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errExpected("arguments", "a JSON object", raw)
		}
		inner := json.RawMessage(s)
		if !json.Valid(inner) || jsonKind(inner) != "object" {
			return nil, errExpected("arguments", "a string holding a JSON object", raw)
		}
		if err := duplicateKey(inner, where); err != nil {
			return nil, &invalidRequest{why: err.Error()}
		}
		raw = inner
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errExpected("arguments", "a JSON object", raw)
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
