package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// fake returns prefix plus n characters of a fixed mixed-case alphanumeric
// cycle: the shape of a generated token, spelled so that no file of this
// repository holds a literal one.
func fake(prefix string, n int) string {
	const cycle = "aB3dE5gH7jK9mN1pQ2sT4vW6yZ8cF0"
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < n; i++ {
		b.WriteByte(cycle[i%len(cycle)])
	}
	return b.String()
}

// fakeJWT is a header.payload.signature token with a real HS256 header.
var fakeJWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9." + fake("", 43)

// lsColors is a real LS_COLORS value, long and full of punctuation.
const lsColors = "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35:bd=40;33;01:cd=40;33;01:or=40;31;01:mi=00:su=37;41:sg=30;43:ca=00:tw=30;42:ow=34;42:st=37;44:ex=01;32:*.tar=01;31:*.tgz=01;31:*.arc=01;31:*.arj=01;31:*.taz=01;31:*.lha=01;31:*.lz4=01;31:*.lzh=01;31:*.lzma=01;31:*.tlz=01;31:*.txz=01;31:*.tzo=01;31:*.t7z=01;31:*.zip=01;31:*.z=01;31:*.dz=01;31:*.gz=01;31:*.lrz=01;31:*.lz=01;31:*.lzo=01;31:*.xz=01;31:*.zst=01;31:*.tzst=01;31:*.bz2=01;31:*.bz=01;31:*.tbz=01;31:*.tbz2=01;31:*.tz=01;31:*.deb=01;31:*.rpm=01;31:*.jar=01;31:*.war=01;31:*.ear=01;31:*.sar=01;31:*.rar=01;31:*.alz=01;31:*.ace=01;31:*.zoo=01;31:*.cpio=01;31:*.7z=01;31:*.rz=01;31:*.cab=01;31:*.wim=01;31:*.swm=01;31:*.dwm=01;31:*.esd=01;31:*.avif=01;35:*.jpg=01;35:*.jpeg=01;35:*.mjpg=01;35:*.mjpeg=01;35:*.gif=01;35:*.bmp=01;35:*.pbm=01;35:*.pgm=01;35:*.ppm=01;35:*.tga=01;35:*.xbm=01;35:*.xpm=01;35:*.tif=01;35:*.tiff=01;35:*.png=01;35:*.svg=01;35:*.svgz=01;35:*.mng=01;35:*.pcx=01;35:*.mov=01;35:*.mpg=01;35:*.mpeg=01;35:*.m2v=01;35:*.mkv=01;35:*.webm=01;35:*.webp=01;35:*.ogm=01;35:*.mp4=01;35:*.m4v=01;35:*.mp4v=01;35:*.vob=01;35:*.qt=01;35:*.nuv=01;35:*.wmv=01;35:*.asf=01;35:*.rm=01;35:*.rmvb=01;35:*.flc=01;35:*.avi=01;35:*.fli=01;35:*.flv=01;35:*.gl=01;35:*.dl=01;35:*.xcf=01;35:*.xwd=01;35:*.yuv=01;35:*.cgm=01;35:*.emf=01;35:*.ogv=01;35:*.ogx=01;35:*.aac=00;36:*.au=00;36:*.flac=00;36:*.m4a=00;36:*.mid=00;36:*.midi=00;36:*.mka=00;36:*.mp3=00;36:*.mpc=00;36:*.ogg=00;36:*.ra=00;36:*.wav=00;36:*.oga=00;36:*.opus=00;36:*.spx=00;36:*.xspf=00;36:*~=00;90:*#=00;90:*.bak=00;90:*.old=00;90:*.orig=00;90:*.part=00;90:*.rej=00;90:*.swp=00;90:*.tmp=00;90:*.dpkg-dist=00;90:*.dpkg-old=00;90:*.ucf-dist=00;90:*.ucf-new=00;90:*.ucf-old=00;90:*.rpmnew=00;90:*.rpmorig=00;90:*.rpmsave=00;90:"

// secretVars must all be scrubbed: by name, by value, or both.
var secretVars = []struct{ name, value string }{
	// Names: the four original words, in any case.
	{"API_KEY", "k1"},
	{"my_password", "p"},
	{"GH_TOKEN", "t"},
	{"AWS_SECRET_ACCESS_KEY", "s"},
	// Names: the words added by the contract.
	{"PASSPHRASE", "correct horse battery staple"},
	{"GPG_PASSPHRASE_FILE", "/run/gpg/pass"},
	{"DB_PASSWD", "pw"},
	{"GOOGLE_APPLICATION_CREDENTIALS", "/home/ada/sa.json"},
	{"docker_credentials", "x"},
	{"SSH_PRIVATE_KEY", "not-a-pem"},
	{"NPM_CONFIG__AUTH", "dXNlcjpwYXNz"},
	{"BASIC_AUTH", "ada:pw"},
	{"AUTH_HEADER", "Basic abc"},
	{"X_AUTHTOKEN", "abc"},
	{"OAUTH_REFRESH", "abc"},
	{"HTTP_AUTHORIZATION", "Bearer abc"},
	{"PROXY_AUTHORISATION", "Basic abc"},
	{"XAUTHORITY", "/run/user/1000/xauth_abc"},
	{"SSH_AUTH_SOCK", "/tmp/ssh-abc/agent.42"},
	// Names: the suffixes.
	{"MYSQL_PWD", "pw"},
	{"ldap_pwd", "pw"},
	{"GH_PAT", "abc"},
	{"azure_devops_ext_pat", "abc"},
	// Names: bashcall's own.
	{"BASHCALL_STALE", "1"},
	{"bashcall_lower", "1"},
	// Values: URLs with a password, alone or in a longer value.
	{"DATABASE_URL", "postgres://u:pw@h/db"},
	{"REDIS_URL", "redis://:hunter2@cache:6379/0"},
	{"MONGO", "mongodb+srv://app:s3cr3t@cluster0.example.net/?retryWrites=true"},
	{"http_proxy", "http://ada:pw@proxy:3128"},
	{"PIP_EXTRA_INDEX_URLS", "https://pypi.org/simple https://ada:pw@pypi.corp.example/simple"},
	{"MIRRORS", "http://a.example:80/,ftp://ada:pw@b.example/pub"},
	{"GIT_CONFIG_VALUE_0", "url.https://x-access-token:abc@github.com/.insteadOf"},
	{"JDBC", "jdbc:mysql://root:root@localhost:3306/app"},
	{"RAW_AT", "postgres://ada:p@ss@db/app"},
	// Values: PEM private keys.
	{"DEPLOY", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"},
	{"TLS_PEM", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n"},
	{"PKCS8", "-----BEGIN PRIVATE KEY-----"},
	{"SIGNING", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQdGBF\n"},
	// Values: token shapes.
	{"X", fake("ghp_", 36)},
	{"GHO", fake("gho_", 36)},
	{"GHS", fake("ghs_", 36)},
	{"GHU", fake("ghu_", 36)},
	{"GHR", fake("ghr_", 36)},
	{"FINE", fake("github_pat_", 82)},
	{"CURL_HEADER", "Authorization: token " + fake("ghp_", 36)},
	{"GL", fake("glpat-", 20)},
	{"SLACK", "xoxb-123456789012-1234567890123-" + fake("", 24)},
	{"SLACK_USER", "xoxp-123456789012-123456789012-123456789012-" + fake("", 32)},
	{"OPENAI", fake("sk-", 48)},
	{"OPENAI_PROJECT", fake("sk-proj-", 120) + "-" + fake("", 20) + "_" + fake("", 10)},
	{"ANTHROPIC", fake("sk-ant-api03-", 95)},
	{"HEX_KEY", "sk-0123456789abcdef0123456789abcdef"},
	{"AWS_ID", "AKIA" + "IOSFODNN7EXAMPLE"},
	{"AWS_TEMP_ID", "ASIA" + "Y34FZKBOKMUTVV7A"},
	{"AWS_ARGS", "--access-key=AKIA" + "IOSFODNN7EXAMPLE --region eu-west-1"},
	{"JWT", fakeJWT},
	{"BEARER", "Bearer " + fakeJWT},
	{"UNSIGNED_JWT", "eyJhbGciOiJub25lIn0" + ".eyJzdWIiOiJhZGEifQ."},
	// Values: more token shapes.
	{"STRIPE", fake("sk_live_", 30)},
	{"STRIPE_R", fake("rk_test_", 24)},
	{"HF", fake("hf_", 34)},
	{"GOOGLE", fake("AIza", 35)},
	// Values: HTTP credentials in headers, under innocent names.
	{"OTEL_EXPORTER_OTLP_HEADERS", "x-team=a,Authorization=Bearer " + fake("", 32)},
	{"GIT_CONFIG_PARAMETERS", "'http.extraheader'='Authorization: Bearer " + fake("", 40) + "'"},
	{"HDR", "Authorization: Basic " + fake("", 24) + "=="},
	{"PLAIN_BEARER", "bearer " + fake("", 20)},
	{"ENCODED", "Authorization=Bearer%20" + fake("", 24)},
	{"TABBED", "Authorization=Bearer\t" + fake("", 24)},
	{"SPACED", "Authorization: Bearer   " + fake("", 24)},
	{"NEGOTIATE", "Authorization: Negotiate YII" + fake("", 30)},
	{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=a"},
	// git's paired configuration variables, with a credential.
	{"GIT_CONFIG_KEY_0", "http.https://github.com/.extraheader"},
	{"GIT_CONFIG_VALUE_0", "AUTHORIZATION: basic " + fake("", 44)},
}

// ordinaryVars must all reach the command.
var ordinaryVars = []struct{ name, value string }{
	{"PATH", "/usr/local/go/bin:/root/go/bin:/usr/local/bin:/usr/bin:/bin"},
	{"MANPATH", "/usr/local/man:/usr/share/man"},
	{"LD_LIBRARY_PATH", "/opt/lib"},
	{"PKG_CONFIG_PATH", "/usr/lib/pkgconfig"},
	{"GOPATH", "/root/go"},
	{"GOFLAGS", "-mod=mod -trimpath"},
	{"GOPROXY", "https://proxy.golang.org,direct"},
	{"LS_COLORS", lsColors},
	{"PWD", "/work/app"},
	{"OLDPWD", "/work"},
	{"HOME", "/root"},
	{"LANG", "en_US.UTF-8"},
	{"SHELL", "/bin/bash"},
	{"DISPLAY", ":0"},
	{"JAVA_HOME", "/usr/lib/jvm/java-21"},
	{"http_proxy", "http://proxy:3128"},
	{"HTTPS_PROXY", "http://proxy.corp.example:8080/"},
	{"NO_PROXY", "localhost,127.0.0.1,.corp.example"},
	{"GIT_AUTHOR_NAME", "Ada Lovelace"},
	{"GIT_AUTHOR_EMAIL", "ada@example.com"},
	{"GIT_AUTHOR_DATE", "2024-01-01T00:00:00Z"},
	{"AUTHORS", "Ada <ada@example.com>, Bob <bob@example.com>"},
	{"EMAIL", "ada@example.com"},
	{"MAIL", "user@host"},
	{"DOCS_URL", "https://example.com/?a=b&c=d@e"},
	{"REMOTE", "git@github.com:x/y.git"},
	{"SSH_REMOTE", "ssh://git@github.com:22/x/y.git"},
	{"USER_URL", "https://ada@example.com/repo"},
	{"PORT_URL", "https://example.com:8443/path?next=/login@home"},
	{"IPV6_URL", "http://[::1]:8080/"},
	{"JDBC_URL", "jdbc:postgresql://db:5432/app?user=app"},
	{"B64", "SGVsbG8sIHdvcmxkISBUaGlzIGlzIGp1c3QgYmFzZTY0IHRleHQu/+AKIAbcd=="},
	{"B64_JSON", "eyJrZXkiOiJ2YWx1ZSJ9"},
	{"DOTTED", "eyJ.a.b"},
	{"SHA256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	{"SSH_PUB", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDk4ZThmOGQ0YzE2ZjM3MGY2ZTQ5 ada@host"},
	{"CA_PEM", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
	{"PUB_PEM", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----\n"},
	{"SKLEARN_MODEL", "sk-learn-model-for-text-classification-v2"},
	{"DISK", "/dev/disk/by-id/ata-sk-9876543210fedcba9876543210fedcba-part1"},
	{"BRANCH", "ghp_pages"},
	{"TASK", "task-sk-" + strings.Repeat("A", 40)},
	{"AWS_REGION", "ap-southeast-1"},
	{"ASIA_REGION", "ASIAPACIFIC"},
	{"AKIA_LONG", "AKIA" + strings.Repeat("B", 17)},
	{"AWS_PROFILE", "dev"},
	{"SLACK_CHANNEL", "xoxb-builds"},
	{"EDITOR", "vim"},
	{"TERM_PROGRAM", "vscode"},
	{"XDG_RUNTIME_DIR", "/run/user/1000"},
	{"DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"},
	{"CONNINFO", "host=db port=5432 user=app dbname=app"},
	{"GIT_SSL_CAINFO", "/etc/ssl/certs/ca-certificates.crt"},
	{"LESS", "-R"},
	{"TZ", "Europe/Paris"},
	{"HISTCONTROL", "ignoreboth"},
	{"EMPTY", ""},
	{"SETUP_NOTE", "basic configuration, bearer of good news"},
	{"NOTE2", "bearers" + fake("", 20)},
	{"HF_HOME", "/data/hf_cache"},
	{"KERNEL_HEADERS", "/usr/src/linux-headers-generic"},
	{"CORS_ALLOW_HEADERS", "Content-Type,Authorization"},
	{"MAVEN_OPTS", "-Dhttp.auth.preference=Negotiate -Dsun.security.krb5.debug=true"},
	{"CI_COMMIT_TITLE", "Negotiate  protocol-v2-upgrade-path"},
	{"CI_COMMIT_MESSAGE", "basic\tsrc/main/java/App.java and more"},
	{"HF_REPO", "hf_internal_model_v2"},
	{"STRIPE_MODE", "sk_test_mode"},
	{"AIZA", "AIzaShort"},
	{"LONG_WORD", "basic internationalization"},
	{"GIT_CONFIG_GLOBAL", "/etc/gitconfig-ci"},
	{"GIT_CONFIG_NOSYSTEM", "1"},
}

// scrubOne runs commandEnv on one variable and reports whether it survived.
func scrubOne(name, value string, rules *envConfig) bool {
	want := name + "=" + value
	return slices.Contains(commandEnv([]string{want}, rules, nil, "/state", ""), want)
}

// TestScrubSecrets: every secret, by name or by value, is removed.
func TestScrubSecrets(t *testing.T) {
	for _, v := range secretVars {
		if scrubOne(v.name, v.value, &envConfig{}) {
			t.Errorf("commandEnv kept %s=%q, want it scrubbed", v.name, v.value)
		}
	}
}

// TestScrubKeepsOrdinary: ordinary variables, many of them near misses of
// a rule, reach the command unchanged.
func TestScrubKeepsOrdinary(t *testing.T) {
	for _, v := range ordinaryVars {
		if !scrubOne(v.name, v.value, &envConfig{}) {
			t.Errorf("commandEnv dropped %s=%q, want it kept", v.name, v.value)
		}
	}
}

// TestScrubKeepWins: [env] keep, by name or glob, restores a variable that
// either scrub would remove; [env] remove still applies afterwards.
func TestScrubKeepWins(t *testing.T) {
	rules := &envConfig{Keep: []string{"SSH_AUTH_SOCK", "DATABASE_URL", "AWS_*", "GH_PAT"}, Remove: []string{"AWS_TEMP_ID"}}
	for _, tt := range []struct {
		name, value string
		want        bool
	}{
		{"SSH_AUTH_SOCK", "/tmp/ssh-abc/agent.42", true},
		{"DATABASE_URL", "postgres://u:pw@h/db", true},
		{"AWS_ID", "AKIA" + "IOSFODNN7EXAMPLE", true},
		{"AWS_SECRET_ACCESS_KEY", "s", true},
		{"GH_PAT", fake("ghp_", 36), true},
		{"AWS_TEMP_ID", "ASIA" + "Y34FZKBOKMUTVV7A", false},
		{"OTHER_URL", "postgres://u:pw@h/db", false},
		{"GH_PAT_2", "x", true},
		{"GH_PAT_3", fake("ghp_", 36), false},
	} {
		if got := scrubOne(tt.name, tt.value, rules); got != tt.want {
			t.Errorf("commandEnv kept %s=%q: %v, want %v", tt.name, tt.value, got, tt.want)
		}
	}
}

// TestScrubbedName pins the name rules where they border ordinary names.
func TestScrubbedName(t *testing.T) {
	for name, want := range map[string]bool{
		"PWD": false, "OLDPWD": false, "_PWD": true, "MY_OLDPWD": false, "OLD_PWD": true,
		"PAT": false, "GH_PAT": true, "XDG_DATA_PATH": false, "PATH": false, "GH_PATTERN": false,
		"AUTH": true, "AUTHOR": false, "AUTHORS": false, "CO_AUTHORED_BY": false, "AUTHORSHIP": false,
		"AUTHOR_AUTH": true, "AUTHORITY": true, "AUTHENTICATE": true, "OAUTH": true, "unauthorized": true,
		"KEYBOARD": true, "Passwd": true, "credential_helper": true, "bashcall_x": true, "BASHCALLX": false,
	} {
		if got := scrubbed(name); got != want {
			t.Errorf("scrubbed(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestValueHoldsCredentialEdges: malformed and truncated shapes neither
// panic nor match.
func TestValueHoldsCredentialEdges(t *testing.T) {
	for _, v := range []string{"", "://", "a://", "a://:", "a://:@", "a://u:@h", "a://u", "://u:p", "-----BEGIN ",
		"-----BEGIN PRIVATE KEY", "ghp_", "gh", "xoxb-", "xox", "sk-", "AKIA", "ASIA123", "eyJ", "eyJhbGciOi.",
		"eyJhbGciOiJIUzI1NiJ9.e", "=", "\x00", "\xff\xfe", fake("ghp_", 29), fake("glpat-", 19)} {
		if valueHoldsCredential(v) {
			t.Errorf("valueHoldsCredential(%q) = true, want false", v)
		}
	}
	for _, v := range []string{"a://:p@", fake("ghp_", 30), "(" + fake("ghp_", 36) + ")", fake("glpat-", 20)} {
		if !valueHoldsCredential(v) {
			t.Errorf("valueHoldsCredential(%q) = false, want true", v)
		}
	}
}

// TestEnvironmentCredentials runs a real call with every secret and every
// ordinary variable in bashcall's environment: env inside the command shows
// no secret, by name or by value, and every ordinary variable.
func TestEnvironmentCredentials(t *testing.T) {
	e := newTestEnv(t, "[env]\nkeep = [\"KEPT_*\"]\n")
	for _, v := range secretVars {
		e.extraEnv = append(e.extraEnv, v.name+"="+v.value)
	}
	e.extraEnv = append(e.extraEnv, "MY_SECRET=hunter2", "KEPT_URL=postgres://u:kept-pw@h/db")
	// Ordinary ones first, so that a secret http_proxy overrides its
	// ordinary twin; exec.Cmd keeps the last value of a name.
	ordinary := []string{}
	for _, v := range ordinaryVars {
		if v.name != "http_proxy" && v.name != "PWD" && v.name != "OLDPWD" {
			ordinary = append(ordinary, v.name+"="+v.value)
		}
	}
	e.extraEnv = append(ordinary, e.extraEnv...)
	r := e.call(bashReq("env -0", ""))
	got := map[string]string{}
	for _, kv := range strings.Split(r.text(), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			got[k] = v
		}
	}
	for _, v := range append(secretVars, struct{ name, value string }{"MY_SECRET", "hunter2"}) {
		if val, ok := got[v.name]; ok {
			t.Errorf("%s=%q reached the command", v.name, val)
		}
		if len(v.value) >= 8 && strings.Contains(r.text(), v.value) {
			t.Errorf("the value of %s reached the command", v.name)
		}
	}
	for _, v := range ordinaryVars {
		if v.name == "http_proxy" || v.name == "PWD" || v.name == "OLDPWD" {
			continue
		}
		if got[v.name] != v.value {
			t.Errorf("%s = %q, want %q", v.name, got[v.name], v.value)
		}
	}
	if got["KEPT_URL"] != "postgres://u:kept-pw@h/db" {
		t.Errorf("KEPT_URL = %q, want it kept by [env] keep", got["KEPT_URL"])
	}
}

// BenchmarkCommandEnv scrubs a 60-variable environment, a realistic one
// with a long LS_COLORS and PATH, as every call does.
func BenchmarkCommandEnv(b *testing.B) {
	var env []string
	for _, v := range ordinaryVars {
		env = append(env, v.name+"="+v.value)
	}
	for i := 0; len(env) < 60; i++ {
		env = append(env, fmt.Sprintf("APP_SETTING_%d=value-%d", i, i))
	}
	rules := &envConfig{Keep: []string{"KEPT_*"}, Remove: []string{"DROP_*"}}
	b.ReportAllocs()
	for b.Loop() {
		commandEnv(env, rules, nil, "/state", "sess")
	}
}

// TestScrubGitConfig: git's paired configuration variables go or stay
// together: all of them when one entry carries a credential (git would
// refuse to run with a key removed and its value left), none when they
// set something else, such as safe.directory in a container.
func TestScrubGitConfig(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		kept bool
	}{
		{[]string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*"}, true},
		{[]string{"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*",
			"GIT_CONFIG_KEY_1=http.https://github.com/.extraheader", "GIT_CONFIG_VALUE_1=AUTHORIZATION: basic x"}, false},
		{[]string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=url.https://github.com/.insteadOf", "GIT_CONFIG_VALUE_0=https://ada:pw@github.com/"}, false},
		{[]string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=credential.helper", "GIT_CONFIG_VALUE_0=store"}, false},
	} {
		got := commandEnv(tt.env, &envConfig{}, nil, "/state", "")
		for _, kv := range tt.env {
			if slices.Contains(got, kv) != tt.kept {
				t.Errorf("%q: %s kept %v, want %v", tt.env, kv, !tt.kept, tt.kept)
			}
		}
	}
}
