package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseRequest covers both request shapes and what is taken from them.
func TestParseRequest(t *testing.T) {
	tests := []struct {
		name, in   string
		wantName   string
		wantArgs   string // the arguments re-encoded
		wantID     string
		wantSess   session
		wantApprov string
	}{
		{name: "mcp", in: `{"name":"bash","arguments":{"command":"ls","description":"d"},"id":"c1","session":{"id":"A","cwd":"/w"},"approval":"allowed-once"}`,
			wantName: "bash", wantArgs: `{"command":"ls","description":"d"}`, wantID: `"c1"`, wantSess: session{"A", "/w"}, wantApprov: "allowed-once"},
		{name: "openai", in: `{"id":"c2","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\",\"description\":\"d\"}"},"session":{"id":"A"}}`,
			wantName: "bash", wantArgs: `{"command":"ls","description":"d"}`, wantID: `"c2"`, wantSess: session{ID: "A"}},
		{name: "numeric id", in: `{"id": 7, "name":"bash_list"}`, wantName: "bash_list", wantArgs: `{}`, wantID: `7`},
		{name: "null optionals", in: `{"id":null,"name":"bash_list","arguments":null,"session":null,"approval":null}`, wantName: "bash_list", wantArgs: `{}`},
		{name: "unknown keys", in: `{"name":"x","extra":[1,2],"arguments":{"a":1}}`, wantName: "x", wantArgs: `{"a":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := parseRequest([]byte(tt.in))
			if err != nil {
				t.Fatalf("parseRequest(%s) = %v", tt.in, err)
			}
			args, _ := json.Marshal(req.Args)
			got := []string{req.Name, string(args), string(req.ID), req.Approval}
			want := []string{tt.wantName, tt.wantArgs, tt.wantID, tt.wantApprov}
			if d := cmp.Diff(want, got); d != "" || req.Session != tt.wantSess {
				t.Errorf("parseRequest(%s) mismatch (-want +got):\n%s session %+v", tt.in, d, req.Session)
			}
		})
	}
}

// TestInvalidRequests: a request the host got wrong is exit status 2 with
// a JSON error response, from the real binary; never a panic or a hang.
func TestInvalidRequests(t *testing.T) {
	e := newTestEnv(t, "")
	tests := []struct{ name, in, want string }{
		{"empty", "", "Error: invalid request: the request is empty; expected a JSON object"},
		{"not json", "hello", "Error: invalid request: the request is not valid JSON: invalid character 'h' looking for beginning of value"},
		{"truncated", `{"name":"bash","arguments":{"command":"ls"`, "Error: invalid request: the request is not valid JSON: unexpected end of JSON input"},
		{"array", `[1,2]`, "Error: invalid request: expected a JSON object, got array"},
		{"string", `"bash"`, "Error: invalid request: expected a JSON object, got string"},
		{"null", `null`, "Error: invalid request: expected a JSON object, got null"},
		{"no name", `{"arguments":{}}`, "Error: invalid request: missing tool name"},
		{"name not string", `{"name":5}`, "Error: invalid request: the tool name must be a string, got 5"},
		{"function not object", `{"function":"bash"}`, `Error: invalid request: function must be an object, got "bash"`},
		{"bad session", `{"name":"bash","session":"A"}`, `Error: invalid request: session must be an object, got "A"`},
		{"bad session id", `{"name":"bash","session":{"id":3}}`, `Error: invalid request: session.id must be a non-empty string, got 3`},
		{"bad approval", `{"name":"bash","approval":"yes"}`, `Error: invalid request: approval must be "allowed-once", "rejected" or "cancelled", got "yes"`},
		{"bad id", `{"name":"bash","id":{"a":1}}`, `Error: invalid request: id must be a string or a number, got {"a":1}`},
		{"trailing garbage", `{"name":"bash"} x`, "Error: invalid request: the request is not valid JSON: invalid character 'x' after top-level value"},
		{"binary", "\x00\xff\xfe{\x01", "Error: invalid request: the request is not valid UTF-8 JSON: invalid character '\\x00' looking for beginning of value"},
		{"over 1 MiB", `{"name":"bash","arguments":{"command":"` + strings.Repeat("a", maxRequestBytes) + `"}}`, "Error: invalid request: the request is over 1 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.run(tt.in)
			if r.code != 2 {
				t.Errorf("exit status = %d, want 2 (stderr %q)", r.code, r.stderr)
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine") {
				t.Errorf("stderr has a stack trace: %s", r.stderr)
			}
			w := decodeResponse(t, r.stdout)
			if !w.IsError || w.text() != tt.want {
				t.Errorf("text = %q, want %q", w.text(), tt.want)
			}
		})
	}
	r := e.run(`{"id":"k","name":"bash","approval":1}`)
	if w := decodeResponse(t, r.stdout); string(w.ID) != `"k"` {
		t.Errorf("an invalid request does not echo its id: %s", r.stdout)
	}
}

// TestToolErrors: every error a foreground call can meet, exactly, and in
// the contract's validation order.
func TestToolErrors(t *testing.T) {
	e := newTestEnv(t, "")
	full := newTestEnv(t, "[sandbox]\nmode = \"danger-full-access\"\n")
	noBG := newTestEnv(t, "[background]\nenabled = false\n")
	tests := []struct {
		name string
		env  *testEnv
		req  string
	}{
		{"unknown_tool", e, `{"name":"rm_rf","arguments":{}}`},
		{"arguments_not_object", e, `{"name":"bash","arguments":[1]}`},
		{"arguments_bad_string", e, `{"name":"bash","arguments":"{\"command\":"}`},
		{"command_missing", e, `{"name":"bash","arguments":{"description":"d"}}`},
		{"command_blank", e, `{"name":"bash","arguments":{"command":"  ","description":"d"}}`},
		{"command_not_string", e, `{"name":"bash","arguments":{"command":["ls"],"description":"d"}}`},
		{"description_missing", e, `{"name":"bash","arguments":{"command":"ls"}}`},
		{"order_command_first", e, `{"name":"bash","arguments":{"timeoutMs":-1}}`},
		{"timeout_negative", e, bashReq("ls", `"timeoutMs":-1`)},
		{"timeout_zero", e, bashReq("ls", `"timeoutMs":0`)},
		{"timeout_string", e, bashReq("ls", `"timeoutMs":"100"`)},
		{"timeout_huge_exponent", e, bashReq("ls", `"timeoutMs":1e999`)},
		{"workdir_number", e, bashReq("ls", `"workdir":5`)},
		{"background_string", e, bashReq("ls", `"run_in_background":"yes"`)},
		{"sandbox_permissions_bad", e, bashReq("ls", `"sandbox_permissions":"root"`)},
		{"justification_blank", e, bashReq("ls", `"sandbox_permissions":"danger-full-access","justification":" "`)},
		{"escalation_no_justification", e, bashReq("ls", `"sandbox_permissions":"danger-full-access"`)},
		{"escalation_only_justification", e, bashReq("ls", `"justification":"because"`)},
		{"background_disabled", noBG, bashReq("ls", `"run_in_background":true`)},
		{"escalation_unavailable", full, bashReq("ls", `"sandbox_permissions":"danger-full-access","justification":"needs it"`)},
		{"escalation_not_wider", e, bashReq("ls", `"sandbox_permissions":"workspace-write","justification":"needs it"`)},
		{"task_id_missing", e, `{"name":"bash_output","arguments":{}}`},
		{"task_id_number", e, `{"name":"bash_kill","arguments":{"task_id":3}}`},
		{"task_unknown", e, `{"name":"bash_output","arguments":{"task_id":"bash-999"}}`},
		{"task_traversal", e, `{"name":"bash_output","arguments":{"task_id":"../../etc"}}`},
		{"wait_not_bool", e, `{"name":"bash_output","arguments":{"task_id":"bash-1","wait":"yes"}}`},
		{"wait_timeout_bad", e, `{"name":"bash_output","arguments":{"task_id":"bash-1","timeout_ms":-5}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.env.call(tt.req)
			if !r.IsError {
				t.Errorf("isError = false for %s", tt.req)
			}
			golden(t, tt.name, r.text())
		})
	}
}

// TestUnknownArgumentsIgnored: keys the tool does not define change
// nothing and are never forwarded.
func TestUnknownArgumentsIgnored(t *testing.T) {
	e := newTestEnv(t, "")
	r := e.call(bashReq(`echo "${INJECTED:-unset}"; cat`, `"env":{"INJECTED":"yes"},"stdin":"data","approval":"allowed-once"`))
	if r.IsError || r.text() != "unset\n" {
		t.Errorf("text = %q", r.text())
	}
}

// FuzzParseRequest: no input panics the parser, and a parsed request
// always carries a tool name. Its seed corpus runs in every go test.
func FuzzParseRequest(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "requests", "*.json"))
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"name":"bash","arguments":"{\"command\":\"ls\"}"}`))
	f.Add([]byte("\xff\x00{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := parseRequest(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid request: ") {
				t.Errorf("error %q has no prefix", err)
			}
			return
		}
		if req.Args == nil && req.ArgsErr == nil {
			t.Errorf("parsed %q without arguments or an arguments error", data)
		}
		if req.ArgsErr == nil && req.Name == toolBash {
			parseBashArgs(req.Args)
		}
		parseTaskArgs(req.Args, true)
		resp := &response{ID: req.ID, Name: req.Name}
		if err := encodeResponse(new(strings.Builder), resp); err != nil {
			t.Errorf("encoding a response to %q: %v", data, err)
		}
	})
}
