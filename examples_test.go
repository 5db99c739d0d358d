package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestExamples runs the example hosts with this binary as bashcall: both
// print the same transcript (tools, a foreground call, a background task
// and its idle notice, a denial, an approval), golden-tested once.
func TestExamples(t *testing.T) {
	for _, tt := range []struct{ name, interpreter, script string }{
		{"python", "python3", "examples/python/host.py"},
		{"node", "node", "examples/node/host.mjs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			interp, err := exec.LookPath(tt.interpreter)
			if err != nil {
				t.Skipf("no %s: %v", tt.interpreter, err)
			}
			script, err := filepath.Abs(tt.script)
			if err != nil {
				t.Fatal(err)
			}
			e := newConfinedEnv(t, "")
			tmp := filepath.Join(e.dir, "tmp")
			if err := os.Mkdir(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			c := exec.Command(interp, script)
			c.Dir = e.workspace
			c.Env = append(os.Environ(), "BASHCALL="+os.Args[0], "BASHCALL_TEST_MAIN=1", "TMPDIR="+tmp,
				"BASHCALL_CONFIG="+e.config, "BASHCALL_STATE_DIR="+e.stateDir, "XDG_CACHE_HOME="+filepath.Join(testBase, "cache"))
			out, err := c.Output()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", tt.interpreter, tt.script, err, out)
			}
			got := bashPath.ReplaceAllString(string(out), "bash: line")
			golden(t, "host", denial.ReplaceAllString(got, "$$DENIED"))
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("the example left %d entries in its TMPDIR", len(left))
			}
		})
	}
}

// bashPath is how bash names itself in an error: its path, which differs
// between hosts.
var bashPath = regexp.MustCompile(`(?m)^\S*bash: line`)

// denial is a write's failure under read-only: a read-only mount where
// bashcall has a mount namespace, a Landlock denial where it has not.
var denial = regexp.MustCompile(`Read-only file system|Permission denied`)
