package main

// What the scrub takes for a credential by its value (env.go): a URL
// with a password, a PEM private key, a token in a well-known shape or an
// HTTP credential, anywhere in the value. Each is a hand-written matcher
// tuned against false positives on ordinary variables, and none is a
// regular expression: the scrub runs on every call.

import "strings"

// valueHoldsCredential reports whether v holds a URL with a password, a PEM
// private key block, a token in a well-known shape or an HTTP credential,
// anywhere in it.
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
