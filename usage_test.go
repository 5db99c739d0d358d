package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// bare runs bashcall with exactly args (no -config or -state-dir).
func bare(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	c := exec.Command(os.Args[0], args...)
	c.Env = append(os.Environ(), "BASHCALL_TEST_MAIN=1")
	c.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	c.Run()
	return result{out.String(), errb.String(), c.ProcessState.ExitCode()}
}

// runInProcess calls run in this process with exactly environ.
func runInProcess(t *testing.T, environ []string, stdin string, args ...string) result {
	t.Helper()
	testOnlyInProcess = true
	t.Cleanup(func() { testOnlyInProcess = false })
	var out, errb strings.Builder
	err := run(args, environ, strings.NewReader(stdin), &out, &errb)
	return result{out.String(), errb.String(), exitCode(err, &errb)}
}

// TestRunInProcess: run reads the environment it is given, not this
// process's: the config and state dir named there are the ones used.
func TestRunInProcess(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, []byte("[sandbox]\nmode = \"danger-full-access\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	t.Setenv("BASHCALL_CONFIG", filepath.Join(dir, "not-this.toml"))
	t.Setenv("BASHCALL_STATE_DIR", filepath.Join(dir, "not-this-state"))
	environ := []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "BASHCALL_CONFIG=" + config, "BASHCALL_STATE_DIR=" + state, "GREETING=from the given environment"}

	r := runInProcess(t, environ, bashReq(`echo "$GREETING"`, ""), "-text")
	if r.code != 0 || r.stdout != "from the given environment\n" {
		t.Errorf("a call in-process: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runInProcess(t, environ, "", "mode", "-session", "A", "read-only"); r.code != 0 {
		t.Fatalf("mode in-process: exit %d, %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(state, "sessions")); err != nil {
		t.Errorf("the state dir of the given environment was not used: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "not-this-state")); err == nil {
		t.Errorf("the process's BASHCALL_STATE_DIR was used")
	}
	if r := runInProcess(t, environ, "", "version"); r.code != 0 || !strings.Contains(r.stdout, config) {
		t.Errorf("version in-process does not name the given config %q among the control paths: %q", config, r.stdout)
	}
	if r := runInProcess(t, append(environ, "BASHCALL_CONFIG="+filepath.Join(dir, "missing.toml")), "", "prompt"); r.code != 0 {
		t.Errorf("the first BASHCALL_CONFIG of the environment is the one read, as with getenv: exit %d, %q", r.code, r.stderr)
	}
}

// TestUnknownCommand: a word that is not a subcommand is named, once,
// with a pointer to the usage, and nothing is read or run.
func TestUnknownCommand(t *testing.T) {
	r := bare(t, bashReq("echo ran", ""), "bogus")
	want := "bashcall: unknown command \"bogus\"\nRun 'bashcall -h' for usage.\n"
	if r.code != 2 || r.stdout != "" || r.stderr != want {
		t.Errorf("bashcall bogus: exit %d, stdout %q, stderr %q; want 2, nothing, %q", r.code, r.stdout, r.stderr, want)
	}
}

// TestUsageErrorsOnce: a bad flag or a stray argument is reported once,
// without the usage text, prefixed by the subcommand's name only.
func TestUsageErrorsOnce(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-nope"}, "bashcall: flag provided but not defined: -nope\nRun 'bashcall -h' for usage.\n"},
		{[]string{"-text", "extra"}, "bashcall: unexpected argument \"extra\"\nRun 'bashcall -h' for usage.\n"},
		{[]string{"prompt", "extra"}, "bashcall: prompt: unexpected argument \"extra\"\nRun 'bashcall -h' for usage.\n"},
		{[]string{"wait", "-nope"}, "bashcall: flag provided but not defined: -nope\nRun 'bashcall -h' for usage.\n"},
	} {
		if r := bare(t, "", tt.args...); r.code != 2 || r.stdout != "" || r.stderr != tt.want {
			t.Errorf("bashcall %q: exit %d, stdout %q, stderr %q; want 2 and %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
		}
	}
}

// TestHelp: -h, a subcommand's -h and help print the usage on stdout,
// once, and exit 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"wait", "-h"}, {"doctor", "-h"}} {
		r := bare(t, "", args...)
		if r.code != 0 || r.stdout != usage || r.stderr != "" {
			t.Errorf("bashcall %q: exit %d, stdout %.80q, stderr %q; want 0 and the usage", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestUsageLists: the usage names every subcommand run dispatches, and
// every environment variable bashcall's code reads.
func TestUsageLists(t *testing.T) {
	for _, cmd := range []string{"serve", "schema", "prompt", "mode", "wait", "mcp", "doctor", "gc", "version", "--version", "help"} {
		if !strings.Contains(usage, "    bashcall "+cmd) && !strings.Contains(usage, "(or "+cmd+")") {
			t.Errorf("the usage does not list %q", cmd)
		}
	}
	files, _ := filepath.Glob("*.go")
	read := regexp.MustCompile(`[gG]etenv\("([A-Z_]+)"\)`)
	names := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range read.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
	}
	if len(names) < 5 {
		t.Fatalf("found only %v: the pattern no longer matches how the code reads its environment", names)
	}
	var missing []string
	for n := range names {
		if !regexp.MustCompile(`(?m)^    ` + n + ` `).MatchString(usage) {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the usage's Environment section lacks %q", missing)
	}
}

// TestTextExact: -text prints the model-facing text byte for byte (the
// contract: "only the model-facing text"), adds no newline, and leaves a
// pending completion notice for the next response, which prints it.
func TestTextExact(t *testing.T) {
	e := newTestEnv(t, "")
	for _, tt := range []struct{ command, want string }{
		{"printf hi", "hi"},
		{"echo hi", "hi\n"},
		{"exit 3", "(no output)\n[exit code: 3]"},
	} {
		if r := e.run(bashReq(tt.command, ""), "-text"); r.code != 0 || r.stdout != tt.want {
			t.Errorf("-text of %q: exit %d, %q, want %q", tt.command, r.code, r.stdout, tt.want)
		}
	}
	if r := e.run(`{"name":"nope","arguments":{}}`, "-text"); r.stdout != `Error: unknown tool "nope"` {
		t.Errorf("-text of an error: %q", r.stdout)
	}
	// The task ends only once started: one that ends before its start
	// is answered has its notice in that answer.
	gate := filepath.Join(e.dir, "gate")
	if w := e.call(startReq("until [ -e "+gate+" ]; do sleep 0.01; done; exit 4", "N")); len(w.Notices) != 0 {
		t.Fatalf("the start's notices: %q", w.Notices)
	}
	os.WriteFile(gate, nil, 0o600)
	running := filepath.Join(sessionDir(e.stateDir, ownerKey("N")), "running", "bash-1")
	waitFor(t, 10*time.Second, "bash-1 to end", func() bool { _, err := os.Stat(running); return errors.Is(err, fs.ErrNotExist) })
	if r := e.run(sessionReq("bash", `{"command":"echo x","description":"d"}`, "N"), "-text"); r.stdout != "x\n" {
		t.Errorf("-text with a notice pending: %q", r.stdout)
	}
	if w := e.call(sessionReq("bash", `{"command":"echo y","description":"d"}`, "N")); len(w.Notices) != 1 || !strings.Contains(w.Notices[0], "bash-1") {
		t.Errorf("the next response's notices: %q", w.Notices)
	}
}
