package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The read grant around withheld paths, tried by a confined command for
// real: cold (the native and the Go launcher) and from a ruleset made
// ahead. Each case reads what it must not, and what it must.

// withheldCase is one way of launching under a grant.
type withheldCase struct {
	name  string
	ahead bool // the native launcher, taking a ruleset made ahead
	goL   bool // the Go launcher
}

var withheldCases = []withheldCase{{name: "native"}, {name: "go", goL: true}, {name: "ahead", ahead: true}}

// runGranted runs script confined with grant g, as c launches, and reports
// what it printed; with c.ahead, it fails the test unless the ruleset made
// ahead was taken.
func runGranted(t *testing.T, c withheldCase, g readGrant, script string) string {
	t.Helper()
	args := []string{"-w", "/dev/null"}
	for _, d := range g.Denied {
		args = append(args, "-deny", d)
	}
	for _, f := range g.FilesOnly {
		args = append(args, "-rf", f)
	}
	args = append(args, "--", "/bin/sh", "-c", script)
	if c.ahead {
		prepareReadRules(g, false)
	}
	rulesAhead.Lock()
	before := rulesAhead.taken
	rulesAhead.Unlock()
	res, out, err := launch(t, c.goL, args...)
	if err != nil || res.RunnerFailure != "" {
		t.Fatalf("%s: launch: %+v, %v\n%s", c.name, res, err, out)
	}
	rulesAhead.Lock()
	taken := rulesAhead.taken > before
	rulesAhead.Unlock()
	if c.ahead && !taken {
		t.Fatalf("%s: the ruleset made ahead was not taken", c.name)
	}
	return out
}

func withheldSetup(t *testing.T, ahead bool) {
	t.Helper()
	if ahead {
		requireRulesAhead(t)
		t.Cleanup(func() {
			rulesAhead.Lock()
			dropRulesAhead()
			rulesAhead.Unlock()
			closeSpentWatch()
		})
	} else {
		requireABI(t, 1)
	}
}

// write makes the file p, and its directory, holding s.
func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReadNestedWithheld: a withheld path beneath another (deny_read "~"
// with the state dir in ~/.local/state) withholds everything beneath the
// outer one: the directories between them are not split, so their other
// entries get no rule.
func TestReadNestedWithheld(t *testing.T) {
	for _, c := range withheldCases {
		t.Run(c.name, func(t *testing.T) {
			withheldSetup(t, c.ahead)
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			state := filepath.Join(home, ".local", "state", "bashcall")
			if err := os.MkdirAll(filepath.Join(state, "spill"), 0o700); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(home, ".local", "share", "keyrings", "login"), "KEYRING-SECRET\n")
			write(t, filepath.Join(home, "top"), "TOP-SECRET\n")
			write(t, filepath.Join(state, "spill", "s1"), "SPILL-OK\n")
			write(t, filepath.Join(dir, "beside"), "BESIDE-OK\n")
			g := grantFor([]string{"~"}, home, state)
			out := runGranted(t, c, g, "cat "+filepath.Join(home, ".local/share/keyrings/login")+" "+filepath.Join(home, "top")+
				" "+filepath.Join(state, "spill", "s1")+" "+filepath.Join(dir, "beside")+" 2>&1; ls "+filepath.Join(home, ".local")+" 2>&1")
			for _, secret := range []string{"KEYRING-SECRET", "TOP-SECRET", "share", "state"} {
				if strings.Contains(out, secret) && !strings.Contains(out, "/"+secret) {
					t.Errorf("%q read under the withheld home:\n%s", secret, out)
				}
			}
			for _, ok := range []string{"SPILL-OK", "BESIDE-OK"} {
				if !strings.Contains(out, ok) {
					t.Errorf("%s not read:\n%s", ok, out)
				}
			}
		})
	}
}

// TestPlanReadRulesNested: the pure plan of a nested pair splits only the
// outer path's ancestors.
func TestPlanReadRulesNested(t *testing.T) {
	tree := map[string][]string{
		"/":              {"home", "dev"},
		"/dev":           {"null"},
		"/home":          {"u", "v"},
		"/home/u":        {".local", "x"},
		"/home/u/.local": {"state", "share"},
	}
	list := func(dir string) ([]os.DirEntry, error) {
		var out []os.DirEntry
		for _, n := range tree[dir] {
			out = append(out, fakeEntry{n, false})
		}
		return out, nil
	}
	g := readGrant{Denied: []string{"/home/u", "/home/u/.local/state/bashcall"}}
	var got []string
	for _, r := range planReadRules(g, accessRead, list) {
		got = append(got, r.Path)
	}
	if want := "/dev/null /home/v"; strings.Join(got, " ") != want {
		t.Errorf("rules %q, want %q", got, want)
	}
	if w := strings.Join(withheldPaths(g), " "); w != "/ /dev /home /home/u" {
		t.Errorf("withheld paths %q", w)
	}
}

// TestDeniedPathsMissing: a deny_read path that does not exist is kept,
// canonical as far as it exists, so that it is withheld should it appear.
func TestDeniedPathsMissing(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(dir, "real-config"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(home, 0o755)
	if err := os.Symlink(filepath.Join(dir, "real-config"), filepath.Join(home, ".config")); err != nil {
		t.Fatal(err)
	}
	got := deniedPaths([]string{"~/.aws", "~/.config/gh", "/nowhere/at/all"}, home, "")
	want := []string{filepath.Join(home, ".aws"), filepath.Join(dir, "real-config", "gh"), "/nowhere/at/all"}
	if strings.Join(got, " ") != strings.Join(sortedCopy(want), " ") {
		t.Errorf("denied %q, want %q", got, sortedCopy(want))
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

// TestReadWithheldAppearsLater: a deny_read path that did not exist when
// the grant was resolved, made before the launch (as while a call waits
// for its approval), is withheld, not granted as a new entry; so is one
// beneath a directory that did not exist either.
func TestReadWithheldAppearsLater(t *testing.T) {
	for _, c := range withheldCases {
		t.Run(c.name, func(t *testing.T) {
			withheldSetup(t, c.ahead)
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			state := filepath.Join(dir, "state")
			os.MkdirAll(filepath.Join(state, "spill"), 0o700)
			write(t, filepath.Join(home, "notes"), "NOTES-OK\n")
			g := grantFor([]string{"~/.aws", "~/.config/gh"}, home, state)
			if c.ahead {
				prepareReadRules(g, false) // made before the paths appear
			}
			write(t, filepath.Join(home, ".aws", "credentials"), "AWS-SECRET\n")
			write(t, filepath.Join(home, ".config", "gh", "hosts.yml"), "GH-SECRET\n")
			c.ahead = false // the change is seen: the call builds its own
			out := runGranted(t, c, g, "cat "+filepath.Join(home, ".aws/credentials")+" "+filepath.Join(home, ".config/gh/hosts.yml")+
				" "+filepath.Join(home, "notes")+" 2>&1")
			if strings.Contains(out, "SECRET") {
				t.Errorf("a withheld path made after the grant was read:\n%s", out)
			}
			if !strings.Contains(out, "NOTES-OK") {
				t.Errorf("notes not read:\n%s", out)
			}
		})
	}
}

// TestReadWithheldDuringApproval: the same end to end, the path made by
// the approval command while the call waits for it.
func TestReadWithheldDuringApproval(t *testing.T) {
	requireABI(t, 1)
	approver := filepath.Join(testBase, "withheld-approver")
	e := newConfinedEnv(t, "[sandbox]\nmode = \"read-only\"\n[approval]\ncommand = ["+jsonString(approver)+"]\n")
	home := filepath.Join(e.dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncat >/dev/null\nmkdir -p " + home + "/.aws && echo AWS-SECRET > " + home + "/.aws/credentials\necho allowed-once\n"
	if err := os.WriteFile(approver, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(approver) })
	e.extraEnv = []string{"HOME=" + home}
	req := `{"name":"bash","arguments":{"command":"cat ~/.aws/credentials; echo ran","description":"d",` +
		`"sandbox_permissions":"workspace-write","justification":"It must write the build output."}}`
	text := e.call(req).text()
	if strings.Contains(text, "AWS-SECRET") || !strings.Contains(text, "ran") {
		t.Errorf("the approved call: %q", text)
	}
}

// TestReadWithheldOtherName: an entry of a split directory that is a
// withheld inode under another name gets no rule: a hard link of a
// withheld file, and (as root) a bind mount of a withheld directory or of
// a split one.
func TestReadWithheldOtherName(t *testing.T) {
	for _, c := range withheldCases {
		t.Run(c.name, func(t *testing.T) {
			withheldSetup(t, c.ahead)
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			state := filepath.Join(dir, "state")
			os.MkdirAll(filepath.Join(state, "spill"), 0o700)
			write(t, filepath.Join(home, ".netrc"), "NETRC-SECRET\n")
			write(t, filepath.Join(home, ".ssh", "key"), "THE-KEY\n")
			write(t, filepath.Join(home, "notes"), "NOTES-OK\n")
			if err := os.Link(filepath.Join(home, ".netrc"), filepath.Join(home, "netrc-link")); err != nil {
				t.Fatal(err)
			}
			g := grantFor([]string{"~/.netrc", "~/.ssh"}, home, state)
			out := runGranted(t, c, g, "cat "+filepath.Join(home, "netrc-link")+" "+filepath.Join(home, "notes")+" 2>&1")
			if strings.Contains(out, "NETRC-SECRET") || !strings.Contains(out, "NOTES-OK") {
				t.Errorf("a hard link of a withheld file:\n%s", out)
			}
			// A bind mount of the same filesystem shows another inode
			// than the listing's: no ruleset is made ahead, and the call
			// builds its own.
			c.ahead = false
			for _, src := range []string{filepath.Join(home, ".ssh"), home} {
				d := filepath.Join(home, "d")
				os.Mkdir(d, 0o755)
				err := unix.Mount(src, d, "", unix.MS_BIND, "")
				if errors.Is(err, unix.EPERM) {
					t.Logf("no bind mount here: %v", err)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				out := runGranted(t, c, g, "cat "+filepath.Join(home, ".ssh", "key")+" "+filepath.Join(d, "key")+" "+filepath.Join(d, ".ssh", "key")+
					" "+filepath.Join(home, "notes")+" 2>&1")
				unix.Unmount(d, unix.MNT_DETACH)
				if strings.Contains(out, "THE-KEY") || !strings.Contains(out, "NOTES-OK") {
					t.Errorf("%s bound at %s:\n%s", src, d, out)
				}
			}
		})
	}
}

// TestWithheldInWritable: a withheld path inside a writable directory
// cannot be withheld, and the call is refused, naming both; one that is
// not there is the command's own to make, and the call runs.
func TestWithheldInWritable(t *testing.T) {
	requireABI(t, 1)
	e := newConfinedEnv(t, "")
	secret := filepath.Join(e.workspace, ".secrets")
	if err := os.WriteFile(e.config, []byte("[sandbox]\ndeny_read = ["+jsonString(secret)+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if text := e.call(bashReq("echo ran", "")).text(); !strings.Contains(text, "ran") {
		t.Errorf("with %s not there: %q", secret, text)
	}
	if err := os.Mkdir(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	text := e.call(bashReq("echo ran", "")).text()
	golden(t, "refused", strings.ReplaceAll(text, e.dir, "$ENV"))
}
