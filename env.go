package main

// The command's environment (PROTOCOL.md section 5): the inherited one minus
// credentials and bashcall's own variables, then the non-interactive
// settings, then the operator's [env] rules, then BASHCALL_*.
//
// The scrub looks at both halves of a variable. A name is a credential when
// it carries a credential word (scrubbedWords, AUTH, a _PWD or _PAT suffix,
// OTEL_*_HEADERS); a value is one when it holds a URL with a password, a
// PEM private key, a token in a well-known shape or an HTTP credential
// (valueHoldsCredential, secrets.go); git's paired config variables go or
// stay together (gitConfigSecret). All are heuristics
// tuned against false positives on ordinary variables: a secret under an
// innocent name in a shape of its own still passes, and operators list such
// names in [env] remove. [env] keep wins over both.
//
// It runs on every call, so it matches by hand: no regexp, no allocation for
// an upper-case name.

import (
	"path"
	"strings"
)

// scrubbedWords mark a credential when they appear anywhere in a name, in
// any case. KEY anywhere also takes KEYBOARD or MONKEY: the contract keeps
// that, since a missed key costs more than a missed keyboard layout.
var scrubbedWords = []string{"KEY", "PASSWORD", "SECRET", "TOKEN",
	"PASSPHRASE", "PASSWD", "CREDENTIAL", "PRIVATE_KEY"}

// scrubbedSuffixes mark a credential at the end of a name (MYSQL_PWD,
// GH_PAT). The underscore spares PWD and OLDPWD, and _PATH is not _PAT.
var scrubbedSuffixes = []string{"_PWD", "_PAT"}

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
	for _, s := range scrubbedSuffixes {
		if strings.HasSuffix(upper, s) {
			return true
		}
	}
	// OpenTelemetry's exporter headers exist to carry an API key's
	// header (OTEL_EXPORTER_OTLP_HEADERS, ..._TRACES_HEADERS); other
	// *_HEADERS (KERNEL_HEADERS, CORS_ALLOW_HEADERS) name no secret.
	if strings.HasPrefix(upper, "OTEL_") && strings.HasSuffix(upper, "_HEADERS") {
		return true
	}
	return hasAuth(upper)
}

// hasAuth reports whether an upper-case name holds AUTH other than as the
// word AUTHOR: GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL and AUTHORS name people,
// while AUTHORIZATION, AUTHORITY (XAUTHORITY), OAUTH_* and SSH_AUTH_SOCK
// name ways to authenticate.
func hasAuth(upper string) bool {
	for i := 0; ; {
		j := strings.Index(upper[i:], "AUTH")
		if j < 0 {
			return false
		}
		i += j + len("AUTH")
		if !strings.HasPrefix(upper[i:], "OR") || strings.HasPrefix(upper[i:], "ORI") {
			return true
		}
	}
}

// gitConfigFamily reports whether name is one of git's variables that
// carry configuration entries in pairs (GIT_CONFIG_COUNT, _KEY_<n>,
// _VALUE_<n>). They go, or stay, together (gitConfigSecret): the KEY rule
// alone would take every _KEY_<n>, leaving git refusing to run, and the
// values, which can carry headers and URLs with credentials, exposed.
func gitConfigFamily(name string) bool {
	return name == "GIT_CONFIG_COUNT" || strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_")
}

// gitConfigSecret reports whether the inherited environment's
// GIT_CONFIG_KEY_<n>/VALUE_<n> entries carry a credential: a key that
// names one (http.extraheader, credential.*, *.password, *token*, a
// cookie file) or a value that holds one. safe.directory and the like
// do not, and the family stays.
func gitConfigSecret(inherited []string) bool {
	for _, kv := range inherited {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "GIT_CONFIG_KEY_"):
			upper := strings.ToUpper(v)
			if scrubbed(v) || strings.Contains(upper, "EXTRAHEADER") || strings.Contains(upper, "COOKIE") || valueHoldsCredential(v) {
				return true
			}
		case strings.HasPrefix(k, "GIT_CONFIG_VALUE_"):
			if valueHoldsCredential(v) {
				return true
			}
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
// operator's [env] rules may still override; they and [env] set are not
// scrubbed, since the operator wrote them.
func commandEnv(inherited []string, rules *envConfig, extra []string, stateDir, sessionID string) []string {
	n := len(inherited) + len(nonInteractive) + len(extra) + len(rules.Set) + 3
	e := &envList{names: make([]string, 0, n), known: make(map[string]bool, n), vals: make(map[string]string, n)}
	gitSecret := gitConfigSecret(inherited)
	for _, kv := range inherited {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		remove := scrubbed(k) || valueHoldsCredential(v)
		if gitConfigFamily(k) {
			remove = gitSecret
		}
		if remove && !matchAny(rules.Keep, k) {
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
