package main

// One tools/call of bashcall mcp: checked, run in a bashcall process of its
// own, its output streamed as progress, cancelled, approved by the person
// through elicitation, and answered as an MCP CallToolResult.
//
// The result is the stdin response reshaped: content (then one text item
// per completion notice), structuredContent and isError as they are; the
// UI cards, the notices and approvalRequired under _meta, as
// "bashcall/present", "bashcall/notices" and "bashcall/approvalRequired".
// A call the client cancels gets no answer at all (the specification's
// "SHOULD NOT send a response"); the notices its process had taken go out
// with the next answer to the same session instead of being lost.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// mcpCall is one tools/call in flight.
type mcpCall struct {
	s       *mcpServer
	id      json.RawMessage
	request map[string]json.RawMessage // the stdin request, without approval
	session string                     // its session id
	token   json.RawMessage            // the progress token; nil: no progress

	mu         sync.Mutex
	proc       *os.Process
	stopped    bool          // aborted: no further process, no more waiting
	cancelled  bool          // by the client: no answer at all
	finished   bool          // answered, or dropped
	stop       chan struct{} // closed once stopped
	base, sent int64         // progress: of earlier runs, and the last value sent
	progressAt time.Time     // when the last progress notification went out
}

// progressSettle is how long a call's answer waits after its last
// progress notification. The MCP TypeScript SDK (1.x) runs a
// notification's handler a microtask after it reads it, but a response's
// at once, and the response retires the call's progress handler: a
// progress notification read in the same chunk as its answer is dropped
// (modelcontextprotocol/typescript-sdk#2580). The order on the wire is
// right either way; the wait keeps the two in separate reads. Measured
// with the SDK: with no wait 15 of 40 calls lost their last update, with
// 1 ms 1 of 40, with 3 ms none of 70, also with both cores busy.
const progressSettle = 5 * time.Millisecond

// childResponse is the response line of a call's bashcall process.
type childResponse struct {
	IsError           bool              `json:"isError"`
	Content           []textContent     `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	Present           json.RawMessage   `json:"present,omitempty"`
	Notices           []string          `json:"notices,omitempty"`
	ApprovalRequired  *approvalRequired `json:"approvalRequired,omitempty"`
}

// callToolResult is MCP's CallToolResult.
type callToolResult struct {
	Content           []textContent   `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError"`
	Meta              map[string]any  `json:"_meta,omitempty"`
}

// startCall checks a tools/call request and runs it on its own.
func (s *mcpServer) startCall(m *rpcMessage) *rpcError {
	var p struct {
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(orEmpty(m.params), &p)
	var name string
	if jsonKind(p.Name) != "string" || json.Unmarshal(p.Name, &name) != nil {
		return rpcErrorf(rpcInvalidParams, "invalid params: name must be a string, got %s", jsonForError(p.Name))
	}
	// A tool that is not one of the four is answered as a stdin call is,
	// with a tool result: Error: unknown tool "<name>" (PROTOCOL.md
	// sections 2 and 10).
	args := orEmpty(p.Arguments)
	if jsonKind(args) != "object" {
		return rpcErrorf(rpcInvalidParams, "invalid params: arguments must be an object, got %s", jsonForError(args))
	}
	meta := map[string]json.RawMessage{}
	if !isNull(p.Meta) && (jsonKind(p.Meta) != "object" || json.Unmarshal(p.Meta, &meta) != nil) {
		return rpcErrorf(rpcInvalidParams, "invalid params: _meta must be an object, got %s", jsonForError(p.Meta))
	}
	c := &mcpCall{s: s, id: m.id, stop: make(chan struct{})}
	if t, ok := present(meta, "progressToken"); ok {
		if k := jsonKind(t); k != "string" && k != "number" {
			return rpcErrorf(rpcInvalidParams, "invalid params: _meta.progressToken must be a string or an integer, got %s", jsonForError(t))
		}
		c.token = compactJSON(t)
	}
	sess, rerr := s.callSession(meta)
	if rerr != nil {
		return rerr
	}
	c.request = map[string]json.RawMessage{"name": p.Name, "arguments": args, "session": sess}
	data, _ := json.Marshal(c.request)
	req, err := parseRequest(data)
	if err != nil {
		why := err.Error()
		if ir, ok := err.(*invalidRequest); ok {
			why = ir.why
		}
		return rpcErrorf(rpcInvalidParams, "invalid params: %s", why)
	}
	c.session = req.Session.ID
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls[string(m.id)] != nil {
		return rpcErrorf(rpcInvalidRequest, "invalid request: id %s is already used by a call in flight", m.id)
	}
	s.calls[string(m.id)] = c
	s.wg.Add(1)
	go c.run()
	return nil
}

// callSession is the session of a call: the one the client names in
// _meta.session, a field it leaves out being the connection's, else the
// connection's own.
func (s *mcpServer) callSession(meta map[string]json.RawMessage) (json.RawMessage, *rpcError) {
	fields := map[string]json.RawMessage{}
	if raw, ok := present(meta, "session"); ok {
		if jsonKind(raw) != "object" || json.Unmarshal(raw, &fields) != nil {
			return nil, rpcErrorf(rpcInvalidParams, `invalid params: _meta.session must be an object {"id", "cwd"}, got %s`, jsonForError(raw))
		}
	}
	if _, ok := present(fields, "id"); !ok {
		fields["id"], _ = json.Marshal(s.session.ID)
	}
	if _, ok := present(fields, "cwd"); !ok && s.session.CWD != "" {
		fields["cwd"], _ = json.Marshal(s.session.CWD)
	}
	b, _ := json.Marshal(fields)
	return b, nil
}

// run answers the call: once, and once more with the person's answer when
// it needs an approval the client can ask for.
func (c *mcpCall) run() {
	defer c.s.wg.Done()
	resp := c.execute("")
	if ar := resp.ApprovalRequired; ar != nil && c.s.canElicit() {
		c.s.pool.refill() // for the approved run: it starts while the person answers
		if answer := c.elicit(ar); answer != "" {
			first := resp
			resp = c.execute(answer)
			resp.Notices = append(first.Notices, resp.Notices...)
		}
	}
	c.finish(resp)
	// The next call's process starts once this call is answered, not
	// while its answer is being written: the two would share the cores.
	c.s.pool.refill()
}

func (s *mcpServer) canElicit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.elicit
}

// finish answers the call, unless the client cancelled it.
func (c *mcpCall) finish(r *childResponse) {
	s := c.s
	c.mu.Lock()
	c.finished = true
	cancelled := c.cancelled
	c.mu.Unlock()
	s.mu.Lock()
	delete(s.calls, string(c.id))
	if id := backgroundTaskID(r); id != "" && c.session == s.session.ID {
		s.ownTasks = append(s.ownTasks, id)
	}
	if cancelled {
		if len(r.Notices) > 0 {
			s.stashed[c.session] = append(s.stashed[c.session], r.Notices...)
		}
		s.mu.Unlock()
		return
	}
	notices := append(s.stashed[c.session], r.Notices...)
	delete(s.stashed, c.session)
	s.mu.Unlock()
	s.reply(c.id, callResult(r, notices), nil)
}

// callResult reshapes a response into a CallToolResult.
func callResult(r *childResponse, notices []string) callToolResult {
	out := callToolResult{Content: r.Content, StructuredContent: r.StructuredContent, IsError: r.IsError, Meta: map[string]any{}}
	for _, n := range notices {
		out.Content = append(out.Content, textContent{Type: "text", Text: n})
	}
	if r.Present != nil {
		out.Meta["bashcall/present"] = r.Present
	}
	if len(notices) > 0 {
		out.Meta["bashcall/notices"] = notices
	}
	if r.ApprovalRequired != nil {
		out.Meta["bashcall/approvalRequired"] = r.ApprovalRequired
	}
	return out
}

// backgroundTaskID is the task a response says it started, if any.
func backgroundTaskID(r *childResponse) string {
	var sc struct {
		Kind   string `json:"kind"`
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(r.StructuredContent, &sc) != nil || sc.Kind != "background" {
		return ""
	}
	return sc.TaskID
}

// abort stops the call: its process gets SIGTERM (and runs its kill
// ladder), a pending elicitation is given up. byClient says the client
// cancelled it, so that it gets no answer.
func (c *mcpCall) abort(byClient bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return
	}
	c.cancelled = c.cancelled || byClient
	if !c.stopped {
		c.stopped = true
		close(c.stop)
	}
	if c.proc != nil {
		c.proc.Signal(syscall.SIGTERM)
	}
}

// execute runs the request, with approval when given, in a bashcall
// process of its own and returns its response.
func (c *mcpCall) execute(approval string) *childResponse {
	req := maps.Clone(c.request)
	if approval != "" {
		req["approval"], _ = json.Marshal(approval)
	}
	data, _ := json.Marshal(req)
	var child *warmChild
	var feedR *os.File
	var err error
	if c.token == nil {
		child, err = c.s.pool.take()
	} else {
		// A call that wants progress gets a process of its own with the
		// feed's pipe as descriptor 3.
		var feedW *os.File
		if feedR, feedW, err = os.Pipe(); err != nil {
			return childFailure(fmt.Errorf("creating the progress pipe: %w", err))
		}
		defer feedR.Close()
		child, err = startChild(append(c.s.childArgs(), "-progress-fd", "3"), c.s.inv.environ, c.s.stderr, []*os.File{feedW})
		feedW.Close()
	}
	if err != nil {
		return childFailure(fmt.Errorf("starting bashcall: %w", err))
	}
	if err := c.begin(child); err != nil {
		child.discard()
		return childFailure(err)
	}
	var relayed <-chan struct{}
	if feedR != nil {
		relayed = c.relay(feedR)
	}
	line, _ := child.ask(data)
	c.mu.Lock()
	c.proc = nil
	c.mu.Unlock()
	if relayed != nil {
		// Only the process held the pipe's other end; the bound is for
		// the unforeseen (a loaded machine can take a second to relay
		// the last update to a slow client).
		select {
		case <-relayed:
		case <-time.After(5 * time.Second):
			feedR.Close()
			<-relayed
		}
		c.mu.Lock()
		wait := progressSettle - time.Since(c.progressAt)
		c.mu.Unlock()
		if wait > 0 {
			time.Sleep(wait)
		}
	}
	return parseChild(line, child)
}

// begin gives the call its process, unless the call was aborted meanwhile.
func (c *mcpCall) begin(child *warmChild) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errAborted()
	}
	c.base = c.sent
	c.proc = child.cmd.Process
	return nil
}

// childArgs are the arguments of a call's bashcall process.
func (s *mcpServer) childArgs() []string {
	args := []string{"-state-dir", s.inv.stateDir, "-reaper", s.reaper, "-launched-as", s.inv.launchName()}
	if s.inv.cfg.path != "" {
		args = append(args, "-config", s.inv.cfg.path)
	}
	return args
}

// parseChild reads the response line of child; anything else becomes an
// internal error response naming what the process said, once it exited.
func parseChild(line []byte, child *warmChild) *childResponse {
	var r childResponse
	if bytes.HasPrefix(line, []byte("{")) && bytes.HasSuffix(line, []byte("}\n")) && json.Unmarshal(line, &r) == nil && len(r.Content) > 0 {
		return &r
	}
	<-child.exited
	return childFailure(fmt.Errorf("bashcall failed (%v): %s", child.waitErr, strings.TrimSpace(child.errText.String())))
}

func childFailure(err error) *childResponse {
	var r childResponse
	json.Unmarshal(errorLine(nil, err), &r)
	return &r
}

// progressUpdate is one line of a call's progress feed (mcpprogress.go).
type progressUpdate struct {
	Progress int64  `json:"progress"`
	Message  string `json:"message"`
}

// relay turns the lines of the progress feed into notifications/progress
// until the feed ends.
func (c *mcpCall) relay(feed *os.File) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(feed)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var u progressUpdate
			if json.Unmarshal(sc.Bytes(), &u) == nil {
				c.progressed(u)
			}
		}
	}()
	return done
}

// progressed sends one progress notification; the value only grows, also
// across the run that asked for an approval and the run that follows.
func (c *mcpCall) progressed(u progressUpdate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.base + u.Progress
	if c.cancelled || v <= c.sent {
		return
	}
	c.sent = v
	c.s.notify("notifications/progress", map[string]any{"progressToken": c.token, "progress": v, "message": u.Message})
	c.progressAt = time.Now()
}

// stopOwnTasks kills the background tasks started in the connection's own
// session, with bash_kill as a call would: once the connection ends, its
// random session id is known to no one, so nothing could read or stop
// them. A session the client named is the client's to keep.
func (s *mcpServer) stopOwnTasks() {
	sess, _ := json.Marshal(map[string]string{"id": s.session.ID})
	for _, id := range s.ownTasks {
		args, _ := json.Marshal(map[string]string{"task_id": id})
		c := &mcpCall{s: s, stop: make(chan struct{}), request: map[string]json.RawMessage{
			"name": json.RawMessage(jsonString(toolKill)), "arguments": args, "session": sess}}
		if r := c.execute(""); r.IsError {
			fmt.Fprintf(s.stderr, "bashcall mcp: stopping task %s: %s\n", id, r.Content[0].Text)
		}
	}
}
