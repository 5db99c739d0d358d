package main

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
)

// TestOutputSchemas: the structuredContent of real results of every tool
// conforms to that tool's outputSchema, and carries no key the schema
// does not describe, so that an MCP client checking results never
// refuses one and the schema does not drift from what bashcall sends.
// Confined, for the sandbox facts of confined runs and of a denial.
func TestOutputSchemas(t *testing.T) {
	e := newConfinedEnv(t, "")
	done := e.start("echo out; echo err >&2; exit 3", "A")
	sleeper := e.start("sleep 60", "A")
	fg := []wireResponse{
		e.call(bashReq("echo hi; echo there >&2; exit 2", "")),
		e.call(bashReq("kill -TERM $$", "")),
		e.call(bashReq("sleep 5", `"timeoutMs":100`)),
		e.call(bashReq("head -c 70000 /dev/zero | tr '\\0' a", "")),
		e.call(bashReq("echo denied > /proc/version", "")),
		e.call(startReq("true", "A")),
	}
	out := []wireResponse{
		e.call(outputReq(sleeper, "A", "")),
		e.call(outputReq(done, "A", `"wait":true,"timeout_ms":30000`)),
	}
	list := e.call(sessionReq(toolList, `{}`, "A"))
	kills := []wireResponse{
		e.call(sessionReq(toolKill, `{"task_id":`+jsonString(sleeper)+`}`, "A")),
		e.call(sessionReq(toolKill, `{"task_id":`+jsonString(done)+`}`, "A")),
	}
	out = append(out, e.call(outputReq(sleeper, "A", "")))
	results := map[string][]wireResponse{toolBash: fg, toolOutput: out, toolKill: kills,
		toolList: {list, e.call(sessionReq(toolList, `{}`, "A")), e.call(sessionReq(toolList, `{}`, "B"))}}
	for tool, rs := range results {
		var schema map[string]any
		if err := json.Unmarshal([]byte(outputSchema(tool)), &schema); err != nil {
			t.Fatalf("outputSchema(%s) is not JSON: %v", tool, err)
		}
		for _, r := range rs {
			if r.IsError {
				t.Fatalf("%s: %s", tool, r.text())
			}
			var v any
			if err := json.Unmarshal(r.StructuredContent, &v); err != nil {
				t.Fatalf("%s: structuredContent %s: %v", tool, r.StructuredContent, err)
			}
			if err := conforms(v, schema, "structuredContent"); err != nil {
				t.Errorf("%s result %s: %v", tool, clip(string(r.StructuredContent), 300), err)
			}
		}
	}
}

// conforms checks v against the subset of JSON Schema the output schemas
// use (type, enum, properties, required, items), and refuses a key no
// "properties" names.
func conforms(v any, schema map[string]any, at string) error {
	if !typeMatches(v, schema["type"]) {
		return fmt.Errorf("%s = %v, want type %v", at, v, schema["type"])
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.Contains(enum, v) {
		return fmt.Errorf("%s = %v, not in %v", at, v, enum)
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		for _, r := range asSlice(schema["required"]) {
			if _, ok := v[r.(string)]; !ok {
				return fmt.Errorf("%s lacks the required %q", at, r)
			}
		}
		for k, kv := range v {
			ps, ok := props[k].(map[string]any)
			if !ok {
				return fmt.Errorf("%s.%s is not in the schema", at, k)
			}
			if err := conforms(kv, ps, at+"."+k); err != nil {
				return err
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, el := range v {
				if err := conforms(el, items, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// typeMatches reports whether v has the type t names (one, or a list).
func typeMatches(v any, t any) bool {
	if list, ok := t.([]any); ok {
		return slices.ContainsFunc(list, func(one any) bool { return typeMatches(v, one) })
	}
	switch v := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case float64:
		return t == "number" || t == "integer" && v == math.Trunc(v)
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
