package main

// Request hygiene (PROTOCOL.md section 2): checks that encoding/json does
// not make. Its decoder keeps the last of two equal keys, turns invalid
// UTF-8 and lone UTF-16 surrogate escapes into U+FFFD, and lets both pass.
// A request read that way can mean one thing to a host that checked it and
// another to bashcall ("approval":"rejected","approval":"allowed-once"),
// and two distinct session ids can decode to the same owner. So such a
// request is refused whole, before any field is read (duplicateKey,
// invalidUTF8At), and a host field is refused where it is read when it
// holds a NUL or a lone surrogate (hostID, hostString).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// jsonFrame is one open object or array of a document being walked.
type jsonFrame struct {
	object  bool
	wantKey bool                // the next token of this object is a key
	keys    map[string]struct{} // keys seen so far; nil until the first
	key     string              // the key whose value is being read
	index   int                 // the array element being read
}

// duplicateKeyError is a duplicate key; top says it is one of the
// request's own keys (not of an object inside it).
type duplicateKeyError struct {
	msg string
	top bool
}

func (e *duplicateKeyError) Error() string { return e.msg }

// duplicateKey walks one valid JSON document once, token by token, and
// reports the first key that appears twice in one object. where names the
// document in the message ("" for the request itself, "arguments" for an
// arguments string). Keys are compared decoded, as json.Unmarshal would
// store them, so "approval" and "appr\u006fval" are the same key.
func duplicateKey(data []byte, where string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // no float parsing: only the structure matters
	var stack []jsonFrame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the request is not valid JSON: %w", err)
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if key, ok := tok.(string); ok {
				f := &stack[n-1]
				if _, dup := f.keys[key]; dup {
					return &duplicateKeyError{fmt.Sprintf("duplicate key %q%s", clip(key, 100), jsonPath(where, stack[:n-1])), n == 1 && where == ""}
				}
				if f.keys == nil {
					f.keys = make(map[string]struct{})
				}
				f.keys[key], f.key, f.wantKey = struct{}{}, key, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, jsonFrame{object: tok == json.Delim('{'), wantKey: true})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if n := len(stack); n > 0 { // a value of the enclosing container ended
			stack[n-1].wantKey = true
			stack[n-1].index++
		}
	}
}

// jsonPath names the object holding a duplicate key for an error message:
// "" at the top of the request, else " in arguments.env" or " in tasks[2]",
// cut to a readable length.
func jsonPath(where string, parents []jsonFrame) string {
	var b strings.Builder
	b.WriteString(where)
	for _, f := range parents {
		switch {
		case !f.object:
			fmt.Fprintf(&b, "[%d]", f.index)
		case b.Len() > 0:
			b.WriteString("." + pathKey(f.key))
		default:
			b.WriteString(pathKey(f.key))
		}
		if b.Len() > 200 {
			break
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return " in " + clip(b.String(), 200)
}

// pathKey writes a key as is when it is a plain name, else quoted, so that
// a key holding a dot or a bracket cannot make a path ambiguous.
func pathKey(k string) string {
	plain := k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0
	if plain {
		return k
	}
	return fmt.Sprintf("%q", clip(k, 100))
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// invalidUTF8At returns the offset of the first byte of data that is not
// valid UTF-8, or -1.
func invalidUTF8At(data []byte) int {
	if utf8.Valid(data) {
		return -1
	}
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}

// loneSurrogate reports whether a JSON string literal escapes one half of
// a UTF-16 surrogate pair without the other ("\ud800"). Decoded, any such
// half becomes U+FFFD, so "a\ud800" and "a\udbff" would be one session.
func loneSurrogate(lit []byte) bool {
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		i++
		if i >= len(lit) || lit[i] != 'u' {
			continue
		}
		r := hex4(lit[i+1:])
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 >= len(lit) || lit[i+1] != '\\' || lit[i+2] != 'u' {
				return true
			}
			if low := hex4(lit[i+3:]); low < 0xDC00 || low > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 reads four hex digits, or returns -1.
func hex4(b []byte) int {
	if len(b) < 4 {
		return -1
	}
	v := 0
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | int(c-'A'+10)
		default:
			return -1
		}
	}
	return v
}

// hostID reads an id field: a string or a number, echoed verbatim, so it
// must be something a host can read back: no NUL, no lone surrogate.
func hostID(top map[string]json.RawMessage, key string) (json.RawMessage, error) {
	v, ok := present(top, key)
	if !ok {
		return nil, nil
	}
	switch jsonKind(v) {
	case "number":
	case "string":
		if err := hostString(key, v, nil); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s must be a string or a number, got %s", key, jsonForError(v))
	}
	return compactJSON(v), nil
}

// hostString decodes a host field's string into dst (when non-nil),
// refusing a NUL byte, which no path, token or C string can hold, and a
// lone surrogate escape, which decodes to U+FFFD like any other.
func hostString(key string, raw json.RawMessage, dst *string) error {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return fmt.Errorf("%s must be a string, got %s", key, jsonForError(raw))
	}
	if strings.ContainsRune(s, 0) {
		return fmt.Errorf("%s must not contain a NUL byte", key)
	}
	if loneSurrogate(raw) {
		return fmt.Errorf("%s must be valid Unicode, got a lone UTF-16 surrogate escape in %s", key, jsonForError(raw))
	}
	if dst != nil {
		*dst = s
	}
	return nil
}
