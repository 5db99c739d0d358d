package main

// The command's environment (PROTOCOL.md section 5): the inherited one minus
// credentials and bashcall's own variables, then the non-interactive
// settings, then the operator's [env] rules, then BASHCALL_*.
//
// The scrub looks at both halves of a variable. A name is a credential when
// it carries a credential word (scrubbedWords, AUTH, a _PWD or _PAT suffix);
// a value is one when it holds a URL with a password, a PEM private key or
// a token in a well-known shape (valueHoldsCredential). Both are heuristics
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

// valueHoldsCredential reports whether v holds a URL with a password, a PEM
// private key block or a token in a well-known shape, anywhere in it.
func valueHoldsCredential(v string) bool {
	return hasURLPassword(v) || hasPrivateKeyPEM(v) || hasTokenShape(v) || hasAuthScheme(v)
}

// hasAuthScheme reports whether v holds an HTTP credential, "Bearer",
// "Basic" or "Negotiate" (any case) at a word's start, then blanks (or
// "%20", as OTEL_EXPORTER_OTLP_HEADERS encodes them), then 16 or more
// token characters: after "Authorization" (":" or "=" between), with a
// digit or both cases among them, as in a list of headers or git's
// http.extraheader (GIT_CONFIG_PARAMETERS); alone, with a digit and both
// cases, and not starting with "-" (a -D option) nor holding a "/" (a
// path). "basic configuration" and "Negotiate protocol-v2" pass.
func hasAuthScheme(v string) bool {
	lower := strings.ToLower(v)
	for _, scheme := range []string{"bearer", "basic", "negotiate"} {
		for i := 0; ; {
			j := strings.Index(lower[i:], scheme)
			if j < 0 {
				break
			}
			start := i + j
			i = start + len(scheme)
			if start > 0 && isAlnum(lower[start-1]) {
				continue
			}
			k := i
			for k < len(v) && (v[k] == ' ' || v[k] == '\t' || strings.HasPrefix(v[k:], "%20")) {
				if v[k] == '%' {
					k += 2
				}
				k++
			}
			if k == i {
				continue // "bearers", "basically"
			}
			body := v[k : k+runLen(v[k:], isHeaderToken)]
			if len(body) < 16 {
				continue
			}
			header := strings.HasSuffix(strings.TrimRight(lower[:start], " \t:='\""), "authorization")
			mixed := hasClass(body, isUpper) && hasClass(body, isLower)
			if header && (hasClass(body, isDigit) || mixed) ||
				hasClass(body, isDigit) && mixed && body[0] != '-' && !strings.Contains(body, "/") {
				return true
			}
		}
	}
	return false
}

// isHeaderToken is a character of an HTTP credential (RFC 9110 token68).
func isHeaderToken(c byte) bool {
	return isAlnum(c) || strings.IndexByte("-._~+/=", c) >= 0
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

// hasURLPassword reports whether v holds scheme://user:password@ anywhere,
// as a list of URLs or a URL inside a longer text may. The user ends at the
// first ':' (it cannot hold one) and may be empty (redis://:pw@host); the
// password, non-empty, ends at the '@' before any '/', '?', '#' or space.
// scheme://user@host and host:port carry no password and pass.
func hasURLPassword(v string) bool {
	for i := 0; ; {
		j := strings.Index(v[i:], "://")
		if j < 0 {
			return false
		}
		i += j + len("://")
		user := strings.IndexAny(v[i:], ":@/?#[ \t\r\n")
		if user < 0 || v[i+user] != ':' {
			continue
		}
		rest := v[i+user+1:]
		pass := strings.IndexAny(rest, "/?#@ \t\r\n")
		if pass > 0 && rest[pass] == '@' {
			return true
		}
	}
}

// hasPrivateKeyPEM reports whether v holds the header of a PEM private key
// ("-----BEGIN RSA PRIVATE KEY-----", OPENSSH, EC, ENCRYPTED, PGP ... BLOCK).
// Certificates and public keys pass.
func hasPrivateKeyPEM(v string) bool {
	const begin = "-----BEGIN "
	for i := 0; ; {
		j := strings.Index(v[i:], begin)
		if j < 0 {
			return false
		}
		i += j + len(begin)
		end := strings.Index(v[i:], "-----")
		if end >= 0 && strings.Contains(v[i:i+end], "PRIVATE KEY") {
			return true
		}
	}
}

// hasTokenShape reports whether a token of a well-known shape starts at a
// token boundary (the value's start or after a character that is not a
// letter or digit) anywhere in v.
func hasTokenShape(v string) bool {
	for i := 0; i < len(v); i++ {
		if i > 0 && isAlnum(v[i-1]) {
			continue
		}
		if tokenAt(v[i:]) {
			return true
		}
	}
	return false
}

// tokenAt reports whether s starts with a token of a well-known shape. Each
// shape asks for its prefix plus a body of the length and characters real
// tokens have, so a word that merely starts like one passes.
func tokenAt(s string) bool {
	switch s[0] {
	case 'g':
		// GitHub: gh[pousr]_ + 36 base62 (30 random, 6 checksum);
		// fine-grained github_pat_ + 82. GitLab: glpat- + 20 or more.
		if len(s) > 4 && strings.HasPrefix(s, "gh") && strings.IndexByte("pousr", s[2]) >= 0 && s[3] == '_' {
			return runLen(s[4:], isAlnum) >= 30
		}
		if b, ok := strings.CutPrefix(s, "github_pat_"); ok {
			return runLen(b, isWordChar) >= 30
		}
		if b, ok := strings.CutPrefix(s, "glpat-"); ok {
			return runLen(b, isURLSafe) >= 20
		}
	case 'x':
		// Slack: xox[abpr]- + digits, dashes and a random tail.
		if len(s) > 5 && strings.HasPrefix(s, "xox") && strings.IndexByte("abpr", s[3]) >= 0 && s[4] == '-' {
			n := runLen(s[5:], isAlnumDash)
			return n >= 20 && hasClass(s[5:5+n], isDigit)
		}
	case 's', 'r':
		if b, ok := strings.CutPrefix(s, "sk-"); ok {
			return apiKeyBody(b[:runLen(b, isURLSafe)])
		}
		// Stripe: sk_ or rk_ (secret, restricted), live_ or test_, then
		// 24 or more base62 with a digit.
		for _, p := range []string{"sk_live_", "sk_test_", "rk_live_", "rk_test_"} {
			if b, ok := strings.CutPrefix(s, p); ok {
				n := runLen(b, isAlnum)
				return n >= 24 && hasClass(b[:n], isDigit)
			}
		}
	case 'h':
		// Hugging Face: hf_ + 34 letters (30 or more taken), with both cases.
		if b, ok := strings.CutPrefix(s, "hf_"); ok {
			n := runLen(b, isAlnum)
			return n >= 30 && hasClass(b[:n], isUpper) && hasClass(b[:n], isLower)
		}
	case 'A':
		// AWS access key id: AKIA (long-term) or ASIA (temporary) + 16
		// upper-case letters or digits, and no more.
		if strings.HasPrefix(s, "AKIA") || strings.HasPrefix(s, "ASIA") {
			return runLen(s[4:], isUpperAlnum) == 16 && (len(s) == 20 || !isAlnum(s[20]))
		}
		// Google API key: AIza + 35 base64url.
		if b, ok := strings.CutPrefix(s, "AIza"); ok {
			return runLen(b, isURLSafe) == 35
		}
	case 'e':
		return isJWT(s)
	}
	return false
}

// apiKeyBody reports whether the text after "sk-" looks like a generated
// key (OpenAI sk-..., sk-proj-..., Anthropic sk-ant-...): 32 characters or
// more with a digit, and either mixed case or one unbroken run of lower-case
// letters and digits (a hex key). A slug such as sk-learn-model-for-text-v2
// has no capital and has dashes, and passes.
func apiKeyBody(b string) bool {
	if len(b) < 32 || !hasClass(b, isDigit) {
		return false
	}
	if hasClass(b, isUpper) && hasClass(b, isLower) {
		return true
	}
	return runLen(b, func(c byte) bool { return isLower(c) || isDigit(c) }) == len(b)
}

// isJWT reports whether s starts with a JSON Web Token: three base64url
// segments joined by dots, the first (a JSON header) starting "eyJ".
func isJWT(s string) bool {
	if !strings.HasPrefix(s, "eyJ") {
		return false
	}
	head := runLen(s, isBase64URL)
	if head < 10 || head >= len(s) || s[head] != '.' {
		return false
	}
	s = s[head+1:]
	payload := runLen(s, isBase64URL)
	return payload >= 2 && payload < len(s) && s[payload] == '.'
}

// runLen is the length of the longest prefix of s whose bytes all satisfy ok.
func runLen(s string, ok func(byte) bool) int {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return i
		}
	}
	return len(s)
}

// hasClass reports whether some byte of s satisfies ok.
func hasClass(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if ok(s[i]) {
			return true
		}
	}
	return false
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isUpper(c byte) bool      { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool      { return 'a' <= c && c <= 'z' }
func isAlnum(c byte) bool      { return isDigit(c) || isUpper(c) || isLower(c) }
func isUpperAlnum(c byte) bool { return isDigit(c) || isUpper(c) }
func isWordChar(c byte) bool   { return isAlnum(c) || c == '_' }
func isAlnumDash(c byte) bool  { return isAlnum(c) || c == '-' }
func isURLSafe(c byte) bool    { return isAlnum(c) || c == '-' || c == '_' }
func isBase64URL(c byte) bool  { return isURLSafe(c) }

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
