package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestConfigExample decodes config.toml.example, so that it cannot drift
// from the defaults or miss a key.
func TestConfigExample(t *testing.T) {
	got, err := loadConfig("config.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	want := defaultConfig()
	want.path = "config.toml.example"
	if d := cmp.Diff(want, got, cmp.AllowUnexported(config{}), cmpopts.EquateEmpty()); d != "" {
		t.Errorf("config.toml.example differs from the defaults (-want +got):\n%s", d)
	}
	b, _ := os.ReadFile("config.toml.example")
	for _, key := range []string{"shell", "workspace", "state_dir", "timeout_ms", "max_timeout_ms", "grace_ms",
		"max_output_bytes", "max_spill_bytes", "max_spill_total_bytes", "enabled", "max_tasks_per_session", "wait_timeout_ms",
		"max_wait_timeout_ms", "retention", "mode", "writable_roots", "network", "deny_read", "policy", "command", "keep", "remove", "set", "workers"} {
		if !strings.Contains(string(b), "\n"+key+" = ") {
			t.Errorf("config.toml.example does not set %s", key)
		}
	}
}

// TestConfigErrors: an unknown key, a bad value, a bad type, each named.
func TestConfigErrors(t *testing.T) {
	tests := []struct{ name, toml, want string }{
		{"unknown key", "timeout = 5\n", `unknown key "timeout"`},
		{"unknown nested key", "[sandbox]\nmodes = \"x\"\n", `unknown key "sandbox.modes"`},
		{"bad mode", "[sandbox]\nmode = \"yolo\"\n", `sandbox.mode must be one of`},
		{"bad network", "[sandbox]\nnetwork = \"maybe\"\n", `sandbox.network must be "on" or "off", got "maybe"`},
		{"relative deny_read", "[sandbox]\ndeny_read = [\".ssh\"]\n", `sandbox.deny_read: ".ssh" is neither an absolute path nor under ~/`},
		{"negative", "grace_ms = -1\n", "grace_ms must be a positive number, got -1"},
		{"zero spill total", "max_spill_total_bytes = 0\n", "max_spill_total_bytes must be a positive number, got 0"},
		{"spill total type", "max_spill_total_bytes = \"1G\"\n", "max_spill_total_bytes"},
		{"type", "timeout_ms = \"5\"\n", "timeout_ms"},
		{"policy", "[approval]\npolicy = \"maybe\"\n", `approval.policy must be "ask" or "never", got "maybe"`},
		{"retention", "[background]\nretention = \"soon\"\n", `background.retention: invalid duration "soon"`},
		{"relative root", "[sandbox]\nwritable_roots = [\"rel\"]\n", `sandbox.writable_roots: "rel" is not an absolute path`},
		{"env name", "[env]\nset = { \"A=B\" = \"x\" }\n", `env.set: "A=B" is not a variable name`},
		{"not toml", "[[[", "config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.toml")
			os.WriteFile(p, []byte(tt.toml), 0o600)
			_, err := loadConfig(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("loadConfig(%q) = %v, want an error containing %q", tt.toml, err, tt.want)
			}
		})
	}
}

// TestConfigDiscovery: flag, then $BASHCALL_CONFIG, then the XDG file.
func TestConfigDiscovery(t *testing.T) {
	dir := t.TempDir()
	xdg := filepath.Join(dir, "xdg")
	os.MkdirAll(filepath.Join(xdg, "bashcall"), 0o700)
	env := map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": dir}
	getenv := func(k string) string { return env[k] }
	if got := configPath("", getenv); got != "" {
		t.Errorf("no file: configPath = %q, want the defaults", got)
	}
	os.WriteFile(filepath.Join(xdg, "bashcall", "config.toml"), nil, 0o600)
	if got := configPath("", getenv); got != filepath.Join(xdg, "bashcall", "config.toml") {
		t.Errorf("xdg: configPath = %q", got)
	}
	env["BASHCALL_CONFIG"] = "/env.toml"
	if got := configPath("", getenv); got != "/env.toml" {
		t.Errorf("env: configPath = %q", got)
	}
	if got := configPath("/flag.toml", getenv); got != "/flag.toml" {
		t.Errorf("flag: configPath = %q", got)
	}
	cfg := defaultConfig()
	cfg.StateDir = "/from-config"
	env = map[string]string{"HOME": "/home/u"}
	for _, tt := range []struct{ flag, env, cfg, want string }{
		{"/f", "/e", "/c", "/f"}, {"", "/e", "/c", "/e"}, {"", "", "/c", "/c"}, {"", "", "", "/home/u/.local/state/bashcall"},
	} {
		env["BASHCALL_STATE_DIR"] = tt.env
		cfg.StateDir = tt.cfg
		if got, _ := stateDirPath(tt.flag, &cfg, getenv); got != tt.want {
			t.Errorf("stateDirPath(%q, env %q, config %q) = %q, want %q", tt.flag, tt.env, tt.cfg, got, tt.want)
		}
	}
}

// TestStateDirRefused: a state dir of ours that a command opened up is
// restored to 0700 with a word on stderr; one owned by someone else, or in
// a directory others can write without the sticky bit, or a file, is
// refused with the path and the fix; a missing one is created 0700.
func TestStateDirRefused(t *testing.T) {
	e := newTestEnv(t, "")
	open := filepath.Join(e.dir, "open")
	os.Mkdir(open, 0o755)
	r := e.run(bashReq("true", ""), "-state-dir", open)
	want := `bashcall: restored mode 0700 of "` + open + `" (it was 0755)` + "\n"
	if fi, err := os.Stat(open); r.code != 0 || r.stderr != want || err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("exit %d, stderr %q, mode %v; want 0, %q, 0700", r.code, r.stderr, fi.Mode(), want)
	}
	// A host can always parse stdout: the refusal still answers in JSON.
	if os.Geteuid() == 0 {
		theirs := filepath.Join(e.dir, "theirs")
		os.Mkdir(theirs, 0o700)
		os.Chown(theirs, 65534, 65534)
		r = e.run(bashReq("true", ""), "-state-dir", theirs)
		want = `bashcall: error: state dir "` + theirs + `" is owned by uid 65534, not by this user (uid 0)` + "\nhint: use a state dir of your own with -state-dir or $BASHCALL_STATE_DIR\n"
		if r.code != 1 || r.stderr != want {
			t.Errorf("someone else's: exit %d, stderr %q; want 1, %q", r.code, r.stderr, want)
		}
		if w := decodeResponse(t, r.stdout); !w.IsError || !strings.HasPrefix(w.text(), "Error: internal: state dir ") {
			t.Errorf("someone else's: response %q", w.text())
		}
	}
	shared := filepath.Join(e.dir, "shared")
	os.Mkdir(shared, 0o777)
	os.Chmod(shared, 0o777)
	r = e.run(bashReq("true", ""), "-state-dir", filepath.Join(shared, "state"))
	if r.code != 1 || !strings.Contains(r.stderr, "which other users can write (mode 0777, no sticky bit)") || !strings.Contains(r.stderr, "hint: ") {
		t.Errorf("world-writable parent: exit %d, stderr %q", r.code, r.stderr)
	}
	os.Chmod(shared, 0o777|os.ModeSticky)
	if r = e.run(bashReq("true", ""), "-state-dir", filepath.Join(shared, "state2")); r.code != 0 {
		t.Errorf("sticky parent: exit %d, stderr %q", r.code, r.stderr)
	}
	file := filepath.Join(e.dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "sub")} {
		r = e.run(bashReq("true", ""), "-state-dir", dir)
		if r.code != 1 || !strings.Contains(r.stderr, `state dir "`+dir+`"`) || !strings.Contains(r.stderr, "not a directory") || !strings.Contains(r.stderr, "\nhint: choose another with -state-dir") {
			t.Errorf("a file: exit %d, stderr %q", r.code, r.stderr)
		}
	}
	r = e.run(bashReq("true", ""))
	if fi, err := os.Stat(e.stateDir); r.code != 0 || err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("new state dir: exit %d, mode %v, %v", r.code, fi.Mode(), err)
	}
}

// TestStateDirNotOurs: a directory named as the state dir by mistake (one
// holding what bashcall never makes there) is refused as it is, never
// chmodded; and, as root, a state dir or spool dir that another user could
// redirect (a symbolic link of theirs, or a directory of theirs above it)
// is refused before anything under it is made or touched.
func TestStateDirNotOurs(t *testing.T) {
	e := newTestEnv(t, "")
	victim := filepath.Join(e.dir, "victim")
	os.MkdirAll(filepath.Join(victim, "sub"), 0o755)
	os.WriteFile(filepath.Join(victim, "file"), nil, 0o644)
	os.WriteFile(filepath.Join(victim, "sub", "bin"), nil, 0o755)
	modes := func() string {
		var b strings.Builder
		for _, p := range []string{"", "file", "sub", "sub/bin"} {
			fi, err := os.Stat(filepath.Join(victim, p))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %04o; ", p, fi.Mode().Perm())
		}
		return b.String()
	}
	before := modes()
	r := e.run(bashReq("true", ""), "-state-dir", victim)
	if after := modes(); r.code != 1 || !strings.Contains(r.stderr, "is group or other accessible (mode 0755)") || strings.Contains(r.stderr, "restored") || after != before {
		t.Errorf("a directory of other things: exit %d, stderr %q, modes %s (were %s)", r.code, r.stderr, after, before)
	}
	shut := filepath.Join(e.dir, "shut") // closed, not opened: the same
	os.Mkdir(shut, 0o700)
	os.WriteFile(filepath.Join(shut, "notes.txt"), nil, 0o600)
	os.Chmod(shut, 0o500)
	r = e.run(bashReq("true", ""), "-state-dir", shut)
	if fi, err := os.Stat(shut); r.code != 1 || !strings.Contains(r.stderr, "holds files bashcall does not make there, and its mode is 0500") || err != nil || fi.Mode().Perm() != 0o500 {
		t.Errorf("a closed directory of other things: exit %d, stderr %q, mode %v", r.code, r.stderr, fi.Mode())
	}
	if os.Geteuid() != 0 {
		return
	}
	theirs := filepath.Join(e.dir, "theirs")
	os.Mkdir(theirs, 0o755)
	os.Chown(theirs, nobodyID, nobodyID)
	link := filepath.Join(theirs, "state") // a link of ours, where they can replace it
	os.Symlink(victim, link)
	r = e.run(bashReq("true", ""), "-state-dir", link)
	if after := modes(); r.code != 1 || !strings.Contains(r.stderr, `is inside "`+theirs+`", which is owned by uid 65534, who could replace it`) || after != before {
		t.Errorf("through a directory of theirs: exit %d, stderr %q, modes %s (were %s)", r.code, r.stderr, after, before)
	}
	mine := filepath.Join(e.dir, "mine")
	os.Mkdir(mine, 0o700)
	link = filepath.Join(mine, "state")
	os.Symlink(victim, link)
	os.Lchown(link, nobodyID, nobodyID)
	r = e.run(bashReq("true", ""), "-state-dir", link)
	if after := modes(); r.code != 1 || !strings.Contains(r.stderr, `is reached through a symbolic link, "`+link+`", which is owned by uid 65534`) || after != before {
		t.Errorf("through a link of theirs: exit %d, stderr %q, modes %s (were %s)", r.code, r.stderr, after, before)
	}
	// Nothing is made through their link either, a missing state dir's
	// parents included; and no spool dir is made private through it.
	made := filepath.Join(link, "new", "state")
	if r = e.run(bashReq("true", ""), "-state-dir", made); r.code != 1 || exists(filepath.Join(victim, "new")) {
		t.Errorf("a new state dir through a link of theirs: exit %d, stderr %q, made: %v", r.code, r.stderr, exists(filepath.Join(victim, "new")))
	}
	if r = e.run("", "serve", "-spool", link, "-once"); r.code != 1 || strings.Contains(r.stderr, "made") {
		t.Errorf("a spool dir through a link of theirs: exit %d, stderr %q", r.code, r.stderr)
	}
	if after := modes(); after != before {
		t.Errorf("modes %s, were %s", after, before)
	}
	inTheirs := filepath.Join(theirs, "real")
	os.Mkdir(inTheirs, 0o700)
	if r = e.run(bashReq("true", ""), "-state-dir", inTheirs); r.code != 1 || !strings.Contains(r.stderr, "who could replace it\nhint: use a state dir in a directory of your own") {
		t.Errorf("inside a directory of theirs: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestUsage: -h prints the usage with examples and exits 0; a bad flag or
// a stray argument exits 2.
func TestUsage(t *testing.T) {
	e := newTestEnv(t, "")
	for _, args := range [][]string{{"-h"}, {"schema", "-h"}, {"help"}} {
		c := e.cmd(args...)
		out, err := c.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "$ bashcall schema -format openai") {
			t.Errorf("bashcall %v: %v\n%s", args, err, out)
		}
	}
	for _, args := range [][]string{{"-nope"}, {"schema", "-format", "xml"}, {"prompt", "extra"}, {"mode"}, {"serve"}} {
		if r := e.run("", args...); r.code != 2 || !strings.Contains(r.stderr, "bashcall -h") {
			t.Errorf("bashcall %v: exit %d, stderr %q; want 2 and a pointer to the usage", args, r.code, r.stderr)
		}
	}
}

// TestXDGBase: an XDG base directory variable is used when absolute and
// ignored when relative, as the XDG specification asks, for the config
// file, the state dir and the build cache alike.
func TestXDGBase(t *testing.T) {
	for _, tt := range []struct {
		env              map[string]string
		config, state    string
		cacheUnderPrefix string
	}{
		{map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "/c", "XDG_STATE_HOME": "/s", "XDG_CACHE_HOME": "/k"},
			"/c/bashcall/config.toml", "/s/bashcall", "/k/bashcall/"},
		{map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "c", "XDG_STATE_HOME": "./s", "XDG_CACHE_HOME": "k"},
			"/h/.config/bashcall/config.toml", "/h/.local/state/bashcall", "/h/.cache/bashcall/"},
		{map[string]string{"XDG_CONFIG_HOME": "c", "XDG_CACHE_HOME": "k"}, "", "", ""},
		{map[string]string{"HOME": "h"}, "h/.config/bashcall/config.toml", "", ""},
	} {
		getenv := func(k string) string { return tt.env[k] }
		if got := defaultConfigPath(getenv); got != tt.config {
			t.Errorf("defaultConfigPath(%v) = %q, want %q", tt.env, got, tt.config)
		}
		if got, _ := stateDirPath("", &config{}, getenv); tt.state != "" && got != tt.state {
			t.Errorf("stateDirPath(%v) = %q, want %q", tt.env, got, tt.state)
		}
		inv := &invocation{getenv: getenv}
		if got := inv.sandboxCachePath("s"); !strings.HasPrefix(got, tt.cacheUnderPrefix) || (tt.cacheUnderPrefix == "") != (got == "") {
			t.Errorf("sandboxCachePath(%v) = %q, want it under %q", tt.env, got, tt.cacheUnderPrefix)
		}
	}
}

// TestPreloadedConfig: a config decoded ahead of its call (a warm child's)
// is used only while the file holds the same bytes; an error is kept too.
func TestPreloadedConfig(t *testing.T) {
	t.Cleanup(func() { preloaded.path, preloaded.data = "", nil })
	p := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(p, []byte("timeout_ms = 5000\n"), 0o600)
	preloadConfig(p)
	preloaded.cfg.TimeoutMs = 7 // marks the preloaded decoding
	if cfg, err := loadConfig(p); err != nil || cfg.TimeoutMs != 7 {
		t.Errorf("same bytes: timeout_ms %d (%v), want the preloaded decoding", cfg.TimeoutMs, err)
	}
	os.WriteFile(p, []byte("timeout_ms = 6000\n"), 0o600)
	if cfg, err := loadConfig(p); err != nil || cfg.TimeoutMs != 6000 {
		t.Errorf("edited: timeout_ms %d (%v), want 6000", cfg.TimeoutMs, err)
	}
	if cfg, err := loadConfig(filepath.Join(filepath.Dir(p), "other.toml")); err == nil {
		t.Errorf("another path, missing: %+v", cfg)
	}
	os.WriteFile(p, []byte("bogus = 1\n"), 0o600)
	preloadConfig(p)
	if _, err := decodeConfig(p, []byte("bogus = 1\n")); preloaded.err == nil || preloaded.err.Error() != err.Error() {
		t.Errorf("a bad config preloaded: %v, want %v", preloaded.err, err)
	}
	sentinel := errors.New("the preloaded error")
	preloaded.err = sentinel
	if _, err := loadConfig(p); err != sentinel {
		t.Errorf("a bad config preloaded, same bytes: %v, want the preloaded error", err)
	}
}
