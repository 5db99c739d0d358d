package main

// Configuration: defaults, discovery, strict TOML decoding and validation.
//
// Precedence (PROTOCOL.md section 1): flags beat the environment, the
// environment beats the config file, the config file beats the defaults.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// config mirrors config.toml.example key for key.
type config struct {
	Shell          string `toml:"shell"`
	Workspace      string `toml:"workspace"`
	StateDir       string `toml:"state_dir"`
	TimeoutMs      int64  `toml:"timeout_ms"`
	MaxTimeoutMs   int64  `toml:"max_timeout_ms"`
	GraceMs        int64  `toml:"grace_ms"`
	MaxOutputBytes int64  `toml:"max_output_bytes"`
	MaxSpillBytes  int64  `toml:"max_spill_bytes"`
	// MaxSpillTotalBytes caps all complete copies of the state dir together.
	MaxSpillTotalBytes int64 `toml:"max_spill_total_bytes"`

	Background backgroundConfig `toml:"background"`
	Sandbox    sandboxConfig    `toml:"sandbox"`
	Approval   approvalConfig   `toml:"approval"`
	Env        envConfig        `toml:"env"`
	Spool      spoolConfig      `toml:"spool"`

	// path is the file the config came from, "" for the built-in defaults.
	path string
}

type backgroundConfig struct {
	Enabled            bool   `toml:"enabled"`
	MaxTasksPerSession int64  `toml:"max_tasks_per_session"`
	WaitTimeoutMs      int64  `toml:"wait_timeout_ms"`
	MaxWaitTimeoutMs   int64  `toml:"max_wait_timeout_ms"`
	Retention          string `toml:"retention"`
}

type sandboxConfig struct {
	Mode          string   `toml:"mode"`
	WritableRoots []string `toml:"writable_roots"`
	Network       string   `toml:"network"`
	DenyRead      []string `toml:"deny_read"`
}

type approvalConfig struct {
	Policy  string   `toml:"policy"`
	Command []string `toml:"command"`
}

type envConfig struct {
	Keep   []string          `toml:"keep"`
	Remove []string          `toml:"remove"`
	Set    map[string]string `toml:"set"`
}

type spoolConfig struct {
	Workers int64 `toml:"workers"`
}

// defaultConfig returns the built-in defaults of PROTOCOL.md section 1.
func defaultConfig() config {
	return config{
		Shell:          "bash",
		TimeoutMs:      120000,
		MaxTimeoutMs:   600000,
		GraceMs:        3000,
		MaxOutputBytes: 64000,
		MaxSpillBytes:  64 << 20,

		MaxSpillTotalBytes: 1 << 30,
		Background: backgroundConfig{
			Enabled:            true,
			MaxTasksPerSession: 10,
			WaitTimeoutMs:      30000,
			MaxWaitTimeoutMs:   600000,
			Retention:          "24h",
		},
		Sandbox:  sandboxConfig{Mode: modeWorkspaceWrite, Network: "on", DenyRead: append([]string(nil), defaultDenyRead...)},
		Approval: approvalConfig{Policy: "ask"},
		Spool:    spoolConfig{Workers: 4},
	}
}

// configPath picks the config file: the flag, else $BASHCALL_CONFIG, else the
// XDG location when it exists. It returns "" for the built-in defaults.
func configPath(flagValue string, getenv func(string) string) string {
	if flagValue != "" {
		return cleanPath(flagValue)
	}
	if p := getenv("BASHCALL_CONFIG"); p != "" {
		return cleanPath(p)
	}
	p := defaultConfigPath(getenv)
	if p == "" {
		return ""
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// cleanPath is p absolute and without "..": the path bashcall both checks
// (control paths, linksOnWay) and opens. A ".." after a directory that a
// command could turn into a symlink would lead the kernel elsewhere than
// the check looked.
func cleanPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// defaultConfigPath is $XDG_CONFIG_HOME/bashcall/config.toml (or under
// ~/.config), whether it exists or not; "" without a home.
func defaultConfigPath(getenv func(string) string) string {
	base := xdgBase(getenv, "XDG_CONFIG_HOME", ".config")
	if base == "" {
		return ""
	}
	return filepath.Join(base, "bashcall", "config.toml")
}

// xdgBase is the XDG base directory named by the variable name, else
// $HOME/fallback; "" without either. A relative value is ignored, as the
// XDG Base Directory specification asks: it would mean a different
// directory from every working directory.
func xdgBase(getenv func(string) string, name, fallback string) string {
	if base := getenv(name); filepath.IsAbs(base) {
		return base
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, fallback)
	}
	return ""
}

// loadConfig decodes the file at p strictly over the defaults and validates
// the result. An empty p yields the defaults.
func loadConfig(p string) (config, error) {
	if p == "" {
		return defaultConfig(), nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return defaultConfig(), fmt.Errorf("config %q: %w", p, err)
	}
	if pre := preloaded; pre.data != nil && pre.path == p && bytes.Equal(pre.data, data) {
		return pre.cfg, pre.err
	}
	return decodeConfig(p, data)
}

// preloaded is the config as a server's warm child decoded it while it
// waited for its call (preloadConfig): a config is a function of its
// file's bytes, so loadConfig takes it when the file still holds them.
var preloaded struct {
	path string
	data []byte
	cfg  config
	err  error
}

// preloadConfig decodes the config file p ahead of the call, and returns
// the config as it is now.
func preloadConfig(p string) (config, error) {
	if p == "" {
		return defaultConfig(), nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return defaultConfig(), err
	}
	preloaded.cfg, preloaded.err = decodeConfig(p, data)
	preloaded.path, preloaded.data = p, data
	return preloaded.cfg, preloaded.err
}

// decodeConfig decodes data, the content of the config file p, over the
// defaults and checks it.
func decodeConfig(p string, data []byte) (config, error) {
	cfg := defaultConfig()
	md, err := toml.Decode(string(data), &cfg)
	if err != nil {
		return cfg, fmt.Errorf("config %q: %w", p, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = strconv.Quote(k.String())
		}
		return cfg, fmt.Errorf("config %q: unknown key %s", p, strings.Join(keys, ", "))
	}
	cfg.path = p
	if err := cfg.validate(); err != nil {
		return cfg, fmt.Errorf("config %q: %w", p, err)
	}
	return cfg, nil
}

// validate rejects values no call could run with, naming the key.
func (c *config) validate() error {
	positive := []struct {
		key string
		v   int64
	}{
		{"timeout_ms", c.TimeoutMs},
		{"max_timeout_ms", c.MaxTimeoutMs},
		{"grace_ms", c.GraceMs},
		{"max_output_bytes", c.MaxOutputBytes},
		{"max_spill_bytes", c.MaxSpillBytes},
		{"max_spill_total_bytes", c.MaxSpillTotalBytes},
		{"background.max_tasks_per_session", c.Background.MaxTasksPerSession},
		{"background.wait_timeout_ms", c.Background.WaitTimeoutMs},
		{"background.max_wait_timeout_ms", c.Background.MaxWaitTimeoutMs},
		{"spool.workers", c.Spool.Workers},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("%s must be a positive number, got %d", p.key, p.v)
		}
	}
	// Bounds that keep durations and buffers representable.
	const maxMs = 1 << 31
	for _, p := range positive {
		if strings.HasSuffix(p.key, "_ms") && p.v > maxMs {
			return fmt.Errorf("%s must be at most %d, got %d", p.key, int64(maxMs), p.v)
		}
	}
	if c.MaxOutputBytes > 1<<30 {
		return fmt.Errorf("max_output_bytes must be at most %d, got %d", 1<<30, c.MaxOutputBytes)
	}
	if c.Spool.Workers > 1024 {
		return fmt.Errorf("spool.workers must be at most 1024, got %d", c.Spool.Workers)
	}
	if strings.TrimSpace(c.Shell) == "" {
		return errors.New("shell must name a bash")
	}
	if _, err := parseDuration(c.Background.Retention); err != nil {
		return fmt.Errorf("background.retention: %w", err)
	}
	if !validMode(c.Sandbox.Mode) {
		return fmt.Errorf("sandbox.mode must be one of %q, got %q", modes, c.Sandbox.Mode)
	}
	if c.Sandbox.Network != "on" && c.Sandbox.Network != "off" {
		return fmt.Errorf(`sandbox.network must be "on" or "off", got %q`, c.Sandbox.Network)
	}
	for _, r := range c.Sandbox.DenyRead {
		if !filepath.IsAbs(r) && r != "~" && !strings.HasPrefix(r, "~/") {
			return fmt.Errorf("sandbox.deny_read: %q is neither an absolute path nor under ~/", r)
		}
	}
	for _, r := range c.Sandbox.WritableRoots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("sandbox.writable_roots: %q is not an absolute path", r)
		}
	}
	if c.Approval.Policy != "ask" && c.Approval.Policy != "never" {
		return fmt.Errorf(`approval.policy must be "ask" or "never", got %q`, c.Approval.Policy)
	}
	if len(c.Approval.Command) > 0 && !filepath.IsAbs(c.Approval.Command[0]) {
		// A name looked up on PATH could be found in a directory that a
		// confined command can write.
		return fmt.Errorf("approval.command: the program must be an absolute path, got %q", c.Approval.Command[0])
	}
	if len(c.Approval.Command) > 0 {
		c.Approval.Command[0] = filepath.Clean(c.Approval.Command[0])
	}
	return c.Env.validate()
}

// validate checks that every name and glob could appear in an environment.
func (e *envConfig) validate() error {
	for _, list := range []struct {
		key   string
		names []string
	}{{"env.keep", e.Keep}, {"env.remove", e.Remove}} {
		for _, n := range list.names {
			if n == "" || strings.ContainsAny(n, "=\x00") {
				return fmt.Errorf("%s: %q is not a variable name", list.key, n)
			}
			if _, err := path.Match(n, ""); err != nil {
				return fmt.Errorf("%s: %q: %w", list.key, n, err)
			}
		}
	}
	for k, v := range e.Set {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("env.set: %q is not a variable name", k)
		}
		if strings.Contains(v, "\x00") {
			return fmt.Errorf("env.set: the value of %q contains a NUL byte", k)
		}
	}
	return nil
}

// parseDuration accepts time.ParseDuration's syntax plus a whole number of
// days ("7d"), the unit retention is usually thought of in.
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: negative", s)
	}
	return d, nil
}

// stateDirPath picks the state dir: the flag, else $BASHCALL_STATE_DIR, else
// the config, else $XDG_STATE_HOME/bashcall (~/.local/state/bashcall).
func stateDirPath(flagValue string, cfg *config, getenv func(string) string) (string, error) {
	for _, p := range []string{flagValue, getenv("BASHCALL_STATE_DIR"), cfg.StateDir} {
		if p != "" {
			return filepath.Abs(p)
		}
	}
	if def := defaultStateDir(getenv); def != "" {
		return def, nil
	}
	return "", errors.New("no state dir: set -state-dir, $BASHCALL_STATE_DIR, state_dir or $HOME")
}

// defaultStateDir is the state dir of a host that names none,
// $XDG_STATE_HOME/bashcall (~/.local/state/bashcall); "" without a home.
func defaultStateDir(getenv func(string) string) string {
	base := xdgBase(getenv, "XDG_STATE_HOME", filepath.Join(".local", "state"))
	if base == "" {
		return ""
	}
	p, err := filepath.Abs(filepath.Join(base, "bashcall"))
	if err != nil {
		return ""
	}
	return p
}
