package main

// bashcall mcp: a Model Context Protocol server on stdin/stdout
// (PROTOCOL.md section 10), JSON-RPC 2.0 with one message a line.
//
// Every tools/call runs in a bashcall process of its own, handed the call
// as a stdin request, as serve runs a spooled call: that process is the
// subreaper of its command, stops it with its kill ladder on SIGTERM, and
// answers with the response line a stdin call gets. So calls served at once
// never share a process tree or a signal handler, cancelling one is a
// SIGTERM to its process, and a result is the stdin path's by construction.
// This file serves the connection; mcprpc.go reads and writes messages,
// mcpcall.go runs a call, mcpelicit.go asks for an approval.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"syscall"
)

// mcpVersions are the protocol revisions bashcall speaks, newest first. A
// client asking for another one is answered with the newest, as the
// lifecycle section of the specification says.
var mcpVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// mcpServer is one connection.
type mcpServer struct {
	inv     *invocation
	stderr  io.Writer
	pool    *warmPool // bashcall processes started ahead of their calls
	session session   // the connection's own session
	tools   json.RawMessage

	outMu sync.Mutex
	out   io.Writer

	mu          sync.Mutex
	initialized bool
	elicit      bool                        // the client can answer elicitation/create
	calls       map[string]*mcpCall         // tools/call in flight, by id
	asked       map[string]chan *rpcMessage // our requests to the client, by id
	asks        int
	stashed     map[string][]string // notices of cancelled calls, by session id
	ownTasks    []string            // tasks started in the connection's session
	reaper      string              // ties them to this process (-reaper)
	wg          sync.WaitGroup
}

// runMCP serves one MCP connection on stdin and stdout until stdin ends or
// a SIGINT or SIGTERM arrives.
func runMCP(args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c commonFlags
	fs := newFlagSet("mcp", stderr, &c)
	wsFlag := fs.String("workspace", "", "the session workspace of the connection (default: config workspace, else the current directory)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	inv, err := loadSettings(&c, environ, true)
	if err != nil {
		return err
	}
	ws, err := mcpWorkspace(*wsFlag, inv.cfg.Workspace)
	if err != nil {
		return usageError{err}
	}
	var id [8]byte
	rand.Read(id[:])
	var listed bytes.Buffer
	json.Compact(&listed, schemaJSON(tools(&inv.cfg), "mcp"))
	s := &mcpServer{inv: inv, stderr: stderr, out: stdout, tools: listed.Bytes(),
		session: session{ID: "mcp-" + hex.EncodeToString(id[:]), CWD: ws},
		calls:   map[string]*mcpCall{}, asked: map[string]chan *rpcMessage{}, stashed: map[string][]string{}}
	s.reaper = newReaperTie(ownerKey(s.session.ID))
	s.pool = newWarmPool(1, func(warm bool) (*warmChild, error) {
		args := s.childArgs()
		if warm {
			args = append(args, "-warm")
		}
		return startChild(args, s.inv.environ, s.stderr, nil)
	})
	defer s.inv.stopDeadCalls() // the records of the waiting children it stopped
	defer s.pool.close()
	s.pool.refill()
	return s.serve(stdin)
}

// mcpWorkspace is the connection's workspace: -workspace, else the config's
// workspace, else the current directory; "" when none can be named, which
// leaves the choice to the call.
func mcpWorkspace(flagValue, configured string) (string, error) {
	ws := flagValue
	if ws == "" {
		ws = configured
	}
	if ws == "" {
		cwd, err := os.Getwd()
		if err != nil {
			return "", nil
		}
		return cwd, nil
	}
	abs, err := filepath.Abs(ws)
	if err == nil {
		_, err = canonicalDir(abs)
	}
	if err != nil {
		return "", fmt.Errorf("mcp: bad workspace %q: %v", ws, err)
	}
	return abs, nil
}

// serve answers messages in the order they come; tools/call requests run
// concurrently. At the end every call in flight is aborted and awaited.
func (s *mcpServer) serve(stdin io.Reader) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// A client gone away makes a write fail with EPIPE, rather than
	// end this process before it has stopped its calls.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	lines := make(chan inbound)
	quit := make(chan struct{})
	defer close(quit)
	go readLines(stdin, lines, quit)
	for {
		select {
		case in, ok := <-lines:
			if !ok {
				s.shutdown()
				return nil
			}
			s.handle(in)
		case <-sigs:
			s.shutdown()
			return nil
		}
	}
}

// handle answers one line. A line that is not a message gets an error with
// a null id; a notification never gets an answer.
func (s *mcpServer) handle(in inbound) {
	if in.tooLong {
		s.replyError(nil, rpcErrorf(rpcInvalidRequest, "invalid request: the message is over %d bytes", maxMCPMessageBytes))
		return
	}
	m, id, rerr := parseMessage(bytes.TrimSpace(in.data))
	switch {
	case rerr != nil:
		s.replyError(id, rerr)
	case m.response():
		s.answered(m)
	case m.notification():
		s.notified(m)
	default:
		s.request(m)
	}
}

// request answers a request; tools/call runs on its own.
func (s *mcpServer) request(m *rpcMessage) {
	switch m.method {
	case "initialize":
		result, err := s.initialize(m.params)
		s.reply(m.id, result, err)
	case "ping":
		s.reply(m.id, struct{}{}, nil)
	case "tools/list":
		s.reply(m.id, s.tools, nil)
	case "tools/call":
		if err := s.startCall(m); err != nil {
			s.replyError(m.id, err)
		}
	default:
		s.replyError(m.id, rpcErrorf(rpcMethodNotFound, "method not found: %s", clip(m.method, 100)))
	}
}

// notified handles a notification: cancellation acts, others are noted
// or ignored.
func (s *mcpServer) notified(m *rpcMessage) {
	if m.method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.params, &p) != nil || p.RequestID == nil {
		return
	}
	s.mu.Lock()
	c := s.calls[string(compactJSON(p.RequestID))]
	s.mu.Unlock()
	if c != nil {
		c.abort(true)
	}
}

// answered hands the client's response to the request of ours waiting.
func (s *mcpServer) answered(m *rpcMessage) {
	s.mu.Lock()
	ch := s.asked[string(m.id)]
	delete(s.asked, string(m.id))
	s.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

// initialize negotiates the protocol revision and notes whether the client
// can be asked for an approval.
func (s *mcpServer) initialize(params json.RawMessage) (any, *rpcError) {
	var p struct {
		ProtocolVersion json.RawMessage            `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(orEmpty(params), &p); err != nil {
		return nil, rpcErrorf(rpcInvalidParams, "invalid params: capabilities must be an object")
	}
	var asked string
	if json.Unmarshal(p.ProtocolVersion, &asked) != nil || jsonKind(p.ProtocolVersion) != "string" {
		return nil, rpcErrorf(rpcInvalidParams, "invalid params: protocolVersion must be a string, got %s", jsonForError(p.ProtocolVersion))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.initialized {
		return nil, rpcErrorf(rpcInvalidRequest, "invalid request: initialize was already answered on this connection")
	}
	s.initialized = true
	s.elicit = formElicitation(p.Capabilities["elicitation"])
	version := mcpVersions[0]
	if slices.Contains(mcpVersions, asked) {
		version = asked
	}
	return initializeResult{ProtocolVersion: version, Capabilities: map[string]any{"tools": struct{}{}},
		ServerInfo: serverInfo{Name: "bashcall", Version: bashcallVersion()}, Instructions: systemPrompt(&s.inv.cfg)}, nil
}

// initializeResult is MCP's InitializeResult; the instructions are the
// system-prompt section of "bashcall prompt".
type initializeResult struct {
	ProtocolVersion string         `json:"protocolVersion"`
	Capabilities    map[string]any `json:"capabilities"`
	ServerInfo      serverInfo     `json:"serverInfo"`
	Instructions    string         `json:"instructions"`
}

type serverInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// formElicitation reports whether an elicitation capability covers form
// requests: an empty object does (the form mode is the default), else it
// must name "form".
func formElicitation(raw json.RawMessage) bool {
	var modes map[string]json.RawMessage
	if json.Unmarshal(raw, &modes) != nil || modes == nil {
		return false
	}
	_, form := modes["form"]
	return len(modes) == 0 || form
}

// bashcallVersion is the version "bashcall version" prints.
func bashcallVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// shutdown aborts the calls in flight (their answers are still written),
// waits for them, and stops what the connection's own session left
// running: no one can reach that session again.
func (s *mcpServer) shutdown() {
	s.mu.Lock()
	calls := make([]*mcpCall, 0, len(s.calls))
	for _, c := range s.calls {
		calls = append(calls, c)
	}
	s.mu.Unlock()
	for _, c := range calls {
		c.abort(false)
	}
	s.wg.Wait()
	s.stopOwnTasks()
}
