package main

// The JSON-RPC 2.0 side of bashcall mcp: lines in, checked messages, lines
// out. One message is one line; a line that is not a message is answered
// with an error and a null id, a notification never is.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// JSON-RPC error codes.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
)

// maxMCPMessageBytes bounds one incoming line; a tools/call request is
// anyway refused by the call path past 1 MiB.
const maxMCPMessageBytes = 4 << 20

// inbound is one line read from stdin.
type inbound struct {
	data    []byte
	tooLong bool
}

// readLines sends each line of r, up to EOF or a read error.
func readLines(r io.Reader, out chan<- inbound, quit <-chan struct{}) {
	defer close(out)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		var in inbound
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			if !in.tooLong && len(in.data)+len(chunk) <= maxMCPMessageBytes {
				in.data = append(in.data, chunk...)
			} else {
				in.tooLong, in.data = true, nil
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if in.tooLong || len(bytes.TrimSpace(in.data)) > 0 {
			select {
			case out <- in:
			case <-quit:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// rpcMessage is one checked JSON-RPC message: a request (id and method),
// a notification (method only) or a response to one of ours (id, and
// result or error).
type rpcMessage struct {
	id     json.RawMessage
	method string
	params json.RawMessage
	result json.RawMessage
	err    json.RawMessage
}

func (m *rpcMessage) notification() bool { return m.id == nil && m.method != "" }

func (m *rpcMessage) response() bool { return m.method == "" }

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func rpcErrorf(code int, format string, a ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, a...)}
}

// parseMessage checks a line as JSON-RPC 2.0. On failure it returns the id
// to answer with, when the message had a usable one.
func parseMessage(data []byte) (*rpcMessage, json.RawMessage, *rpcError) {
	if !json.Valid(data) || invalidUTF8At(data) >= 0 {
		return nil, nil, rpcErrorf(rpcParseError, "parse error: the message is not valid UTF-8 JSON")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return nil, nil, rpcErrorf(rpcInvalidRequest, "invalid request: expected a JSON-RPC message object, got %s (batches are not supported)", jsonKind(data))
	}
	m := &rpcMessage{params: top["params"], result: top["result"], err: top["error"]}
	method, hasMethod := top["method"]
	if !hasMethod && (m.result != nil || m.err != nil) {
		// A response is never answered, whatever is wrong with it; one
		// that matches no request of ours is dropped.
		m.id = compactJSON(top["id"])
		return m, nil, nil
	}
	if id, ok := top["id"]; ok {
		if k := jsonKind(id); k != "string" && k != "number" {
			return nil, nil, rpcErrorf(rpcInvalidRequest, "invalid request: id must be a string or a number, got %s", jsonForError(id))
		}
		m.id = compactJSON(id)
	}
	if err := duplicateKey(data, ""); err != nil {
		if err.Error() == `duplicate key "id"` {
			m.id = nil // which one would be a guess
		}
		return nil, m.id, rpcErrorf(rpcInvalidRequest, "invalid request: %v", err)
	}
	if string(top["jsonrpc"]) != `"2.0"` {
		return nil, m.id, rpcErrorf(rpcInvalidRequest, `invalid request: jsonrpc must be "2.0", got %s`, jsonForError(top["jsonrpc"]))
	}
	if !hasMethod {
		return nil, m.id, rpcErrorf(rpcInvalidRequest, "invalid request: a message needs a method, or an id and a result or an error")
	}
	if json.Unmarshal(method, &m.method) != nil || jsonKind(method) != "string" || m.method == "" {
		return nil, m.id, rpcErrorf(rpcInvalidRequest, "invalid request: method must be a non-empty string, got %s", jsonForError(method))
	}
	if !isNull(m.params) && jsonKind(m.params) != "object" {
		return nil, m.id, rpcErrorf(rpcInvalidParams, "invalid params: params must be an object, got %s", jsonForError(m.params))
	}
	return m, nil, nil
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if isNull(raw) {
		return json.RawMessage("{}")
	}
	return raw
}

// rpcReply is a response line.
type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

func (s *mcpServer) reply(id json.RawMessage, result any, err *rpcError) {
	if err != nil {
		s.replyError(id, err)
		return
	}
	s.send(rpcReply{JSONRPC: "2.0", ID: id, Result: result})
}

func (s *mcpServer) replyError(id json.RawMessage, err *rpcError) {
	if id == nil {
		id = json.RawMessage("null")
	}
	s.send(rpcReply{JSONRPC: "2.0", ID: id, Error: err})
}

// notify sends a notification.
func (s *mcpServer) notify(method string, params any) {
	s.send(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", method, params})
}

// send writes one message as one line. A failed write is dropped: the
// client is gone, and the end of stdin follows.
func (s *mcpServer) send(v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(s.stderr, "bashcall mcp: encoding a message: %v\n", err)
		return
	}
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.out.Write(b.Bytes())
}
