package main

// The command's environment (PROTOCOL.md section 5): the inherited one minus
// credentials and bashcall's own variables, then the non-interactive
// settings, then the operator's [env] rules, then BASHCALL_*.
//
// The scrub is a name heuristic: a secret under an innocent name (a
// PASSPHRASE, a DATABASE_URL with a password in it) passes. Operators list
// such names in [env] remove.

import (
	"path"
	"strings"
)

// scrubbedWords mark a credential when they appear anywhere in a name, in
// any case.
var scrubbedWords = []string{"KEY", "PASSWORD", "SECRET", "TOKEN"}

// nonInteractive keeps commands from paging, colouring or prompting.
var nonInteractive = []string{"NO_COLOR=1", "TERM=dumb", "PAGER=cat", "GIT_PAGER=cat", "GIT_TERMINAL_PROMPT=0"}

// scrubbed reports whether the scrub removes name.
func scrubbed(name string) bool {
	upper := strings.ToUpper(name)
	if strings.HasPrefix(upper, "BASHCALL_") {
		return true
	}
	for _, w := range scrubbedWords {
		if strings.Contains(upper, w) {
			return true
		}
	}
	return false
}

// matchAny reports whether name matches one of the names or globs.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// envList is an environment with one value per name, in first-seen order.
type envList struct {
	names []string
	known map[string]bool
	vals  map[string]string
}

func (e *envList) set(k, v string) {
	if !e.known[k] {
		e.known[k] = true
		e.names = append(e.names, k)
	}
	e.vals[k] = v
}

func (e *envList) strings() []string {
	out := make([]string, 0, len(e.names))
	for _, k := range e.names {
		if v, ok := e.vals[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// commandEnv builds the environment of one command. extra holds bashcall's
// own settings for this call (the sandbox's cache directory), which the
// operator's [env] rules may still override.
func commandEnv(inherited []string, rules *envConfig, extra []string, stateDir, sessionID string) []string {
	e := &envList{known: map[string]bool{}, vals: map[string]string{}}
	for _, kv := range inherited {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || (scrubbed(k) && !matchAny(rules.Keep, k)) {
			continue
		}
		e.set(k, v)
	}
	for _, list := range [][]string{nonInteractive, extra} {
		for _, kv := range list {
			k, v, _ := strings.Cut(kv, "=")
			e.set(k, v)
		}
	}
	for k := range e.vals {
		if matchAny(rules.Remove, k) {
			delete(e.vals, k)
		}
	}
	for k, v := range rules.Set {
		e.set(k, v)
	}
	e.set("BASHCALL_SHELL", "1")
	e.set("BASHCALL_HOME", stateDir)
	if sessionID != "" {
		e.set("BASHCALL_SESSION_ID", sessionID)
	}
	return e.strings()
}
