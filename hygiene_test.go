package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestDuplicateKey: every object at every depth is checked, keys compare
// decoded, equal keys in different objects are fine, and the message
// names the key and the object holding it.
func TestDuplicateKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{}`, ""},
		{`{"a":1,"b":{"a":1},"c":[{"a":1},{"a":1}]}`, ""},
		{`{"a":"a","b":"a","c":["a","a"]}`, ""},
		{`{"a":{"b":1},"c":{"b":2}}`, ""},
		{`{"a":1,"A":2}`, ""},
		{`{"a":1,"a":1}`, `duplicate key "a"`},
		{`{"a":1,"\u0061":1}`, `duplicate key "a"`},
		{`{"a":{"b":{"c":[0,{"d":1,"d":2}]}}}`, `duplicate key "d" in a.b.c[1]`},
		{`{"a":[[[],[{"x":1,"x":1}]]]}`, `duplicate key "x" in a[0][1][0]`},
		{`{"a":{"x":1},"a":{"y":1}}`, `duplicate key "a"`},
		{`{"":1,"":2}`, `duplicate key ""`},
		{`{"k y":{"z":1,"z":2}}`, `duplicate key "z" in "k y"`},
		{`{"q\"":{"z":1,"z":2}}`, `duplicate key "z" in "q\""`},
		{`{"` + strings.Repeat("k", 300) + `":0,"` + strings.Repeat("k", 300) + `":0}`, `duplicate key "` + strings.Repeat("k", 100) + `…"`},
	}
	for _, tt := range tests {
		got := ""
		if err := duplicateKey([]byte(tt.in), ""); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("duplicateKey(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if err := duplicateKey([]byte(`{"a":1,"a":2}`), "function.arguments"); err == nil || err.Error() != `duplicate key "a" in function.arguments` {
		t.Errorf("duplicateKey with where = %v", err)
	}
}

// TestDuplicateKeyPathBounded: a duplicate deep inside a long path gives
// a message of bounded length.
func TestDuplicateKeyPathBounded(t *testing.T) {
	doc := strings.Repeat(`{"`+strings.Repeat("p", 50)+`":`, 2000) + `{"x":1,"x":2}` + strings.Repeat("}", 2000)
	err := duplicateKey([]byte(doc), "arguments")
	if err == nil || len(err.Error()) > 400 || !strings.HasPrefix(err.Error(), `duplicate key "x" in arguments.ppp`) {
		t.Errorf("duplicateKey(deep) = %v (%d bytes)", err, len(fmt.Sprint(err)))
	}
}

// TestLoneSurrogate: half a surrogate pair is found wherever it is; a
// pair, other escapes and an escaped backslash before "u" are not.
func TestLoneSurrogate(t *testing.T) {
	tests := []struct {
		lit  string
		want bool
	}{
		{`"abc"`, false},
		{`"\ud83d\ude00"`, false},
		{`"\uD83D\uDE00x"`, false},
		{`"\u00e9\n\\ud800"`, false}, // \\ is a backslash; "ud800" is text
		{`"\ud800"`, true},
		{`"\udc00"`, true},
		{`"x\ud83d"`, true},
		{`"\ud83dx"`, true},
		{`"\ud83d\n"`, true},
		{`"\ud83d\u0041"`, true},
		{`"\ud83d\ud83d\ude00"`, true},
	}
	for _, tt := range tests {
		if got := loneSurrogate([]byte(tt.lit)); got != tt.want {
			t.Errorf("loneSurrogate(%s) = %v, want %v", tt.lit, got, tt.want)
		}
	}
}

// TestInvalidUTF8At: the offset of the first bad byte, or -1.
func TestInvalidUTF8At(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", -1},
		{"héllo ✓", -1},
		{"\xff", 0},
		{"ab\xc3", 2},
		{"é\xed\xa0\x80", 2}, // an encoded surrogate is not UTF-8
		{"\xc0\xaf", 0},      // overlong
	}
	for _, tt := range tests {
		if got := invalidUTF8At([]byte(tt.in)); got != tt.want {
			t.Errorf("invalidUTF8At(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// hasDuplicateKey is a second, recursive implementation for
// FuzzDuplicateKey to compare with: values are decoded whole with Decode
// and walked again, keys are read with Token.
func hasDuplicateKey(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, _ := dec.Token()
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return false
			}
			if seen[k.(string)] || hasDuplicateKey(v) {
				return true
			}
			seen[k.(string)] = true
		}
	case json.Delim('['):
		for dec.More() {
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return false
			}
			if hasDuplicateKey(v) {
				return true
			}
		}
	}
	return false
}

// FuzzDuplicateKey: the single-pass walk agrees with the recursive one on
// every valid document, and never panics on any.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":[{"b":1},{"b":1,"c":{"b":2,"b":3}}]}`, `[{"a":1},{"a":1}]`, `{"\u0061":1,"a":1}`, `"x"`, `[[],{}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := duplicateKey(data, "")
		if !json.Valid(data) {
			return
		}
		if got, want := err != nil, hasDuplicateKey(data); got != want {
			t.Errorf("duplicateKey(%s) = %v, the recursive walk says duplicate: %v", data, err, want)
		}
	})
}

// BenchmarkParseRequest: a request near the 1 MiB limit, in the shapes
// that cost the most to check: one long string, and many small objects.
func BenchmarkParseRequest(b *testing.B) {
	long := `{"name":"bash","arguments":{"command":"` + strings.Repeat("a", maxRequestBytes-100) + `","description":"d"}}`
	var many strings.Builder
	many.WriteString(`{"name":"bash","arguments":{"command":"ls","description":"d","x":[`)
	for many.Len() < maxRequestBytes-100 {
		many.WriteString(`{"a":1,"b":[2]},`)
	}
	many.WriteString(`0]}}`)
	for _, tt := range []struct{ name, req string }{{"long_string", long}, {"many_objects", many.String()}} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.req)))
			for b.Loop() {
				if _, err := parseRequest([]byte(tt.req)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
