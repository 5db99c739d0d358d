package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// withheldSetup skips a test the kernel cannot run, drops a ruleset made
// ahead at its end, and returns a new canonical directory and the path of
// a home in it.
func withheldSetup(t *testing.T, ahead bool) (dir, home string) {
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
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, "home")
}

// stateAt makes a state dir, with its spill directory, at state.
func stateAt(t *testing.T, state string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(state, "spill"), 0o700); err != nil {
		t.Fatal(err)
	}
	return state
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
			dir, home := withheldSetup(t, c.ahead)
			state := stateAt(t, filepath.Join(home, ".local", "state", "bashcall"))
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
	_, split := splitPlan(g)
	if s := strings.Join(sortedKeys(split), " "); s != "/ /dev /home" {
		t.Errorf("split %q", s)
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
			dir, home := withheldSetup(t, c.ahead)
			state := stateAt(t, filepath.Join(dir, "state"))
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
			dir, home := withheldSetup(t, c.ahead)
			state := stateAt(t, filepath.Join(dir, "state"))
			write(t, filepath.Join(home, ".netrc"), "NETRC-SECRET\n")
			write(t, filepath.Join(home, ".ssh", "key"), "THE-KEY\n")
			write(t, filepath.Join(home, "notes"), "NOTES-OK\n")
			if err := os.Link(filepath.Join(home, ".netrc"), filepath.Join(home, "netrc-link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(filepath.Join(home, ".ssh", "key"), filepath.Join(home, "key-link")); err != nil {
				t.Fatal(err)
			}
			g := grantFor([]string{"~/.netrc", "~/.ssh"}, home, state)
			out := runGranted(t, c, g, "cat "+filepath.Join(home, "netrc-link")+" "+filepath.Join(home, "key-link")+" "+
				filepath.Join(home, ".ssh", "key")+" "+filepath.Join(home, "notes")+" 2>&1")
			if strings.Contains(out, "NETRC-SECRET") || strings.Contains(out, "THE-KEY") || !strings.Contains(out, "NOTES-OK") {
				t.Errorf("a hard link of a withheld file, or of one in a withheld directory:\n%s", out)
			}
			os.Remove(filepath.Join(home, "key-link"))
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
				unmount := func() { unix.Unmount(d, unix.MNT_DETACH) }
				t.Cleanup(unmount)
				out := runGranted(t, c, g, "cat "+filepath.Join(home, ".ssh", "key")+" "+filepath.Join(d, "key")+" "+filepath.Join(d, ".ssh", "key")+
					" "+filepath.Join(home, "notes")+" 2>&1")
				unmount()
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

// TestReadWithheldDangling: a deny_read path through a dangling symlink
// is withheld at the symlink's target, should that appear; a directory
// made beside it there stays readable through the symlink.
func TestReadWithheldDangling(t *testing.T) {
	for _, c := range withheldCases {
		t.Run(c.name, func(t *testing.T) {
			dir, home := withheldSetup(t, c.ahead)
			state := stateAt(t, filepath.Join(dir, "state"))
			persist := filepath.Join(dir, "persist")
			write(t, filepath.Join(home, "notes"), "NOTES-OK\n")
			os.Mkdir(persist, 0o755)
			os.Symlink(filepath.Join(persist, "aws"), filepath.Join(home, ".aws"))
			os.Symlink(filepath.Join(persist, "config"), filepath.Join(home, ".config"))
			g := grantFor([]string{"~/.aws", "~/.config/gh"}, home, state)
			if c.ahead {
				prepareReadRules(g, false)
			}
			write(t, filepath.Join(persist, "aws", "credentials"), "AWS-SECRET\n")
			write(t, filepath.Join(persist, "config", "gh", "hosts.yml"), "GH-SECRET\n")
			write(t, filepath.Join(persist, "config", "other", "x"), "OTHER-OK\n")
			c.ahead = false
			out := runGranted(t, c, g, "cat "+filepath.Join(home, ".aws/credentials")+" "+filepath.Join(persist, "config/gh/hosts.yml")+
				" "+filepath.Join(home, ".config/other/x")+" "+filepath.Join(home, "notes")+" 2>&1")
			if strings.Contains(out, "SECRET") {
				t.Errorf("a withheld path through a dangling symlink was read:\n%s", out)
			}
			if !strings.Contains(out, "OTHER-OK") || !strings.Contains(out, "NOTES-OK") {
				t.Errorf("what is not withheld was not read:\n%s", out)
			}
		})
	}
}

// TestResolveMissing: canonicalPrefix, the path a missing one will have, as the kernel
// resolves it: a dangling symlink followed, ".." taken after it.
func TestResolveMissing(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	os.MkdirAll(filepath.Join(dir, "other", "sub"), 0o755)
	os.Symlink(filepath.Join(dir, "other", "sub"), filepath.Join(dir, "link"))
	os.Symlink("nowhere/deeper", filepath.Join(dir, "dangling"))
	os.Symlink("loop", filepath.Join(dir, "loop"))
	for in, want := range map[string]string{
		dir + "/link/../zz":                    filepath.Join(dir, "other", "zz"),
		filepath.Join(dir, "dangling", "x"):    filepath.Join(dir, "nowhere", "deeper", "x"),
		filepath.Join(dir, "link", "new", "a"): filepath.Join(dir, "other", "sub", "new", "a"),
		filepath.Join(dir, "loop", "x"):        filepath.Join(dir, "loop", "x"),
		dir + "/plain/./b/":                    filepath.Join(dir, "plain", "b"),
		"/":                                    "/",
		dir + "/../../../../../../..":          "/",
	} {
		if got := canonicalPrefix(in); got != want {
			t.Errorf("canonicalPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestReadWithheldBeneathFile: a deny_read path beneath a regular file
// is not there; the file stays readable.
func TestReadWithheldBeneathFile(t *testing.T) {
	for _, c := range withheldCases {
		t.Run(c.name, func(t *testing.T) {
			dir, home := withheldSetup(t, c.ahead)
			state := stateAt(t, filepath.Join(dir, "state"))
			write(t, filepath.Join(home, "plain"), "PLAIN-OK\n")
			g := grantFor([]string{"~/plain/x"}, home, state)
			out := runGranted(t, c, g, "cat "+filepath.Join(home, "plain")+" 2>&1")
			if !strings.Contains(out, "PLAIN-OK") {
				t.Errorf("the file above a deny_read path:\n%s", out)
			}
		})
	}
}

// TestWithheldRefuses: what no entry's rule may be on, rule by rule.
func TestWithheldRefuses(t *testing.T) {
	dir := t.TempDir()
	w := withheldSet{ids: map[fileID]bool{{1, 2}: true}, aliased: map[string]bool{filepath.Join(dir, "alias"): true}}
	reg := func(nlink int) *unix.Stat_t {
		st := &unix.Stat_t{Dev: 1, Ino: 9, Mode: unix.S_IFREG}
		setCount(&st.Nlink, nlink) // uint64 on amd64, uint32 on arm64
		return st
	}
	cases := []struct {
		name string
		r    landlockRule
		st   *unix.Stat_t
		want bool
	}{
		{"withheld inode", landlockRule{Path: "/e", Entry: true}, &unix.Stat_t{Dev: 1, Ino: 2, Mode: unix.S_IFDIR}, true},
		{"other inode", landlockRule{Path: "/e", Entry: true}, &unix.Stat_t{Dev: 1, Ino: 3, Mode: unix.S_IFDIR}, false},
		{"same inode, other device", landlockRule{Path: "/e", Entry: true}, &unix.Stat_t{Dev: 2, Ino: 2, Mode: unix.S_IFDIR}, false},
		{"in an aliased directory", landlockRule{Path: filepath.Join(dir, "alias", "e"), Entry: true}, reg(1), true},
		{"hard-linked file", landlockRule{Path: "/e", Entry: true}, reg(2), true},
		{"file", landlockRule{Path: "/e", Entry: true}, reg(1), false},
		{"no longer a file", landlockRule{Path: "/e", Entry: true, NotDir: true}, &unix.Stat_t{Dev: 1, Ino: 9, Mode: unix.S_IFDIR}, true},
		{"still a file", landlockRule{Path: "/e", Entry: true, NotDir: true}, reg(1), false},
		{"not an entry", landlockRule{Path: "/e"}, &unix.Stat_t{Dev: 1, Ino: 2, Mode: unix.S_IFDIR}, false},
	}
	for _, c := range cases {
		if got := w.refuses(c.r, c.st); got != c.want {
			t.Errorf("%s: refuses %v, want %v", c.name, got, c.want)
		}
	}
}

// TestReadWithheldAliased (as root): a split directory that is a withheld
// directory by another name (a bind mount) grants none of its entries,
// nor does a withheld path beneath another, bound into a split directory.
func TestReadWithheldAliased(t *testing.T) {
	for _, c := range withheldCases[:2] { // a bind mount: no ruleset is made ahead
		t.Run(c.name, func(t *testing.T) {
			dir, home := withheldSetup(t, false)
			state := stateAt(t, filepath.Join(home, ".local", "state", "bashcall"))
			write(t, filepath.Join(home, "notes"), "HOME-SECRET\n")
			write(t, filepath.Join(state, "record"), "STATE-SECRET\n")
			write(t, filepath.Join(dir, "beside"), "BESIDE-OK\n")
			write(t, filepath.Join(home, "sub", "file"), "SUB-SECRET\n")
			bind := func(src, dst string) {
				os.MkdirAll(dst, 0o755)
				if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
					t.Skipf("no bind mount here: %v", err)
				}
				t.Cleanup(func() { unix.Unmount(dst, unix.MNT_DETACH) })
			}
			bind(home, filepath.Join(dir, "mnt", "homebind"))
			bind(state, filepath.Join(dir, "mnt", "statebind"))
			g := grantFor([]string{"~", filepath.Join(dir, "mnt", "homebind", ".aws"), filepath.Join(dir, "mnt", "homebind", "sub", ".aws")}, home, state)
			out := runGranted(t, c, g, "cat "+filepath.Join(home, "notes")+" "+filepath.Join(dir, "mnt/homebind/notes")+
				" "+filepath.Join(home, "sub/file")+" "+filepath.Join(dir, "mnt/homebind/sub/file")+
				" "+filepath.Join(dir, "mnt/statebind/record")+" "+filepath.Join(dir, "beside")+" 2>&1")
			if strings.Contains(out, "SECRET") || !strings.Contains(out, "BESIDE-OK") {
				t.Errorf("a withheld directory by another name:\n%s", out)
			}
		})
	}
}

// serveEcho has serve answer, in spool, a call named name that echoes
// word, and checks the answer.
func serveEcho(t *testing.T, e *testEnv, spool, name, word string) {
	t.Helper()
	drop(t, spool, name, `{"name":"bash","arguments":{"command":"echo `+word+`","description":"d"}}`)
	if r := e.run("", "serve", "-spool", spool, "-once"); r.code != 0 {
		t.Fatalf("serve: exit %d: %s", r.code, r.stderr)
	}
	if got := awaitResponse(t, spool, name).text(); got != word+"\n" {
		t.Fatalf("%s = %q", name, got)
	}
}

// TestSpoolWithheld: a confined call that serve runs cannot read the
// spool dir: other calls' requests and responses.
func TestSpoolWithheld(t *testing.T) {
	e := newConfinedEnv(t, "")
	dir := e.spoolDir()
	serveEcho(t, e, dir, "a.json", "SECRET-OUTPUT-A")
	drop(t, dir, "b.json", `{"name":"bash","arguments":{"command":"cat `+filepath.Join(dir, "out", "a.json")+`; ls `+filepath.Join(dir, "out")+`; echo done","description":"d"}}`)
	if r := e.run("", "serve", "-spool", dir, "-once"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := awaitResponse(t, dir, "b.json").text()
	if strings.Contains(got, "SECRET-OUTPUT-A") || !strings.Contains(got, "cannot open directory") || !strings.Contains(got, "done") {
		t.Errorf("b = %q", got)
	}
}

// TestOwnDirsWithheld: bashcall's directories are out of every confined
// call's reach, not only of the process they belong to: a spool dir serve
// listed, from a stdin call on the same state dir and from one on
// another; the default state dir's tasks, from a call on another state
// dir; another session's build cache, by exact path too. A workspace
// that contains a listed spool dir is refused, and so is a spool dir in
// /tmp.
func TestOwnDirsWithheld(t *testing.T) {
	e := newConfinedEnv(t, "")
	e.extraEnv = []string{"XDG_STATE_HOME=" + filepath.Join(e.dir, "xdg"), "XDG_CACHE_HOME=" + filepath.Join(e.dir, "cache")}
	spool := e.spoolDir()
	serveEcho(t, e, spool, "a.json", "SECRET-SPOOL")
	def := filepath.Join(e.dir, "xdg", "bashcall")
	if r := e.run(startReq("echo SECRET-TASK", "D"), "-state-dir", def); r.code != 0 {
		t.Fatalf("task: exit %d: %s", r.code, r.stderr)
	}
	if r := e.run(outputReq("bash-1", "D", `"wait":true`), "-state-dir", def); !strings.Contains(r.stdout, "SECRET-TASK") {
		t.Fatalf("task output: %s %s", r.stdout, r.stderr)
	}
	if text := e.call(sessionReq("bash", `{"command":"echo SECRET-CACHE > $XDG_CACHE_HOME/b; echo $XDG_CACHE_HOME","description":"d"}`, "B")).text(); !strings.HasPrefix(text, e.dir) {
		t.Fatalf("B's cache: %q", text)
	}
	peek := "cat " + filepath.Join(spool, "out", "a.json") + " " + filepath.Join(def, "tasks", "bash-1", "stdout.tail") + " " +
		filepath.Join(e.dir, "cache", "bashcall", "*", "b") + " " + filepath.Join(e.dir, "cache", "bashcall", "$(ls "+filepath.Join(e.dir, "cache", "bashcall")+")", "b") +
		" " + filepath.Join(e.dir, "cache", "bashcall", sessionCacheKey("B"), "b") + "; echo own > $XDG_CACHE_HOME/a && cat $XDG_CACHE_HOME/a"
	other := filepath.Join(e.dir, "other-state")
	for _, args := range [][]string{nil, {"-state-dir", other}} {
		r := e.run(sessionReq("bash", `{"command":`+jsonString(peek)+`,"description":"d"}`, "A"), args...)
		if text := decodeResponse(t, r.stdout).text(); strings.Contains(text, "SECRET") || !strings.Contains(text, "own\n") {
			t.Errorf("state dir %v: %q", args, text)
		}
	}
	inside := filepath.Join(e.dir, "outer")
	spool2 := filepath.Join(inside, "spool")
	os.MkdirAll(spool2, 0o700)
	if r := e.run("", "serve", "-spool", spool2, "-once"); r.code != 0 {
		t.Fatalf("serve: exit %d: %s", r.code, r.stderr)
	}
	r := e.run(`{"name":"bash","arguments":{"command":"echo ran","description":"d"},"session":{"id":"W","cwd":` + jsonString(inside) + `}}`)
	if text := decodeResponse(t, r.stdout).text(); !strings.Contains(text, "overlaps "+strconv.Quote(spool2)) {
		t.Errorf("a workspace containing a spool dir: %q", text)
	}
	// The same path made again is not that spool dir: it refuses nothing.
	os.RemoveAll(spool2)
	os.MkdirAll(spool2, 0o700)
	r = e.run(`{"name":"bash","arguments":{"command":"echo ran","description":"d"},"session":{"id":"W","cwd":` + jsonString(inside) + `}}`)
	if text := decodeResponse(t, r.stdout).text(); text != "ran\n" {
		t.Errorf("a workspace containing a spool dir's path made again: %q", text)
	}
	tmpSpool, err := os.MkdirTemp("/tmp", "bashcall-spool-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmpSpool)
	full := filepath.Join(e.dir, "full.toml") // a serve that confines nothing itself
	write(t, full, "[sandbox]\nmode = \"danger-full-access\"\n")
	for _, args := range [][]string{{"serve", "-spool", tmpSpool, "-once"}, {"serve", "-config", full, "-spool", tmpSpool, "-once"}} {
		if r := e.run("", args...); r.code != 1 || !strings.Contains(r.stderr, "overlaps \"/tmp\", which confined calls can write") {
			t.Errorf("a spool dir in /tmp, %v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if text := e.call(bashReq("echo ran", "")).text(); text != "ran\n" {
		t.Errorf("after the refused spool dir: %q", text)
	}
}

// TestReadWithheldRetargeted: a symlink made or changed on the way to a
// withheld path while the call waits for its approval would have the
// rules grant its new target: the call is refused instead.
func TestReadWithheldRetargeted(t *testing.T) {
	requireABI(t, 1)
	for _, c := range []struct{ name, setup, during string }{
		{"made", "mkdir -p $DIR/persist/aws", "ln -s $DIR/persist/aws $HOME/.aws"},
		{"retargeted", "mkdir -p $DIR/dot1/config $DIR/dot2/config/gh && ln -s $DIR/dot1/config $HOME/.config",
			"ln -sfn $DIR/dot2/config $HOME/.config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			approver := filepath.Join(testBase, "retarget-approver-"+c.name)
			e := newConfinedEnv(t, "[sandbox]\nmode = \"read-only\"\n[approval]\ncommand = ["+jsonString(approver)+"]\n")
			home := filepath.Join(e.dir, "home")
			expand := func(s string) string {
				return strings.NewReplacer("$DIR", e.dir, "$HOME", home).Replace(s)
			}
			if err := os.MkdirAll(home, 0o755); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("sh", "-c", expand(c.setup)).CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			write(t, filepath.Join(e.dir, "persist", "aws", "credentials"), "AWS-SECRET\n")
			write(t, filepath.Join(e.dir, "dot2", "config", "gh", "hosts.yml"), "GH-SECRET\n")
			script := "#!/bin/sh\ncat >/dev/null\n" + expand(c.during) + "\necho allowed-once\n"
			if err := os.WriteFile(approver, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(approver) })
			e.extraEnv = []string{"HOME=" + home}
			req := `{"name":"bash","arguments":{"command":"cat ~/.aws/credentials ~/.config/gh/hosts.yml; echo ran","description":"d",` +
				`"sandbox_permissions":"workspace-write","justification":"It must write the build output."}}`
			text := e.call(req).text()
			if strings.Contains(text, "SECRET") {
				t.Fatalf("a withheld path read through a symlink made during the approval: %q", text)
			}
			golden(t, "refused", text)
			if text := e.call(bashReq("cat ~/.aws/credentials ~/.config/gh/hosts.yml; echo ran", "")).text(); strings.Contains(text, "SECRET") || !strings.Contains(text, "ran") {
				t.Errorf("the next call: %q", text)
			}
		})
	}
}

// TestHomeDirAbsolute: "~" in deny_read is $HOME only if that is an
// absolute path; else the user's home from /etc/passwd.
func TestHomeDirAbsolute(t *testing.T) {
	passwd := passwdHome(os.Getuid())
	if !filepath.IsAbs(passwd) {
		t.Skipf("no home in /etc/passwd for uid %d", os.Getuid())
	}
	for home, want := range map[string]string{"/some/home": "/some/home", "": passwd, "rel/home": passwd, ".": passwd} {
		if got := homeDir(func(string) string { return home }); got != want {
			t.Errorf("HOME=%q: home %q, want %q", home, got, want)
		}
	}
}

// TestSplitPlanRelative: a path not absolute, which the launcher refuses
// as an argument, still ends the split plan's walk up.
func TestSplitPlanRelative(t *testing.T) {
	denied, split := splitPlan(readGrant{Denied: []string{"a/b", "c"}})
	if len(denied) != 2 || !split["a"] || !split["."] {
		t.Errorf("denied %v, split %v", denied, split)
	}
	if _, err := parseLauncherArgs([]string{"-deny", "rel/path", "--", "true"}); err == nil {
		t.Error("the launcher took a relative -deny")
	}
}

// TestDevicesOnlyInDev (root): in the launcher's mount namespace a device
// file opens in /dev alone: not through a bind of /dev elsewhere, nor as a
// node made outside it (in the workspace or not), which /dev's filter
// would not see.
func TestDevicesOnlyInDev(t *testing.T) {
	for _, launcher := range []string{"native", "go"} {
		t.Run(launcher, func(t *testing.T) {
			e := newConfinedEnv(t, "")
			rootMountNS(t)
			if launcher == "go" {
				e.extraEnv = []string{"BASHCALL_LAUNCHER=go"}
			}
			out, in := filepath.Join(e.dir, "zero-out"), filepath.Join(e.workspace, "zero-in")
			for _, p := range []string{out, in} {
				if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
					t.Skipf("mknod: %v", err)
				}
			}
			bound := filepath.Join(e.dir, "devbind")
			os.Mkdir(bound, 0o755)
			if err := unix.Mount("/dev", bound, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				t.Skipf("bind mount: %v", err)
			}
			t.Cleanup(func() { unix.Unmount(bound, unix.MNT_DETACH) })
			script := ""
			for _, p := range []string{out, in, filepath.Join(bound, "zero"), "/dev/zero"} {
				script += "head -c 3 " + p + " | wc -c; "
			}
			text := e.call(bashReq(script+"echo end", "")).text()
			if n := strings.Count(text, "Permission denied"); n != 3 || !strings.Contains(text, "3\n") {
				t.Errorf("3 devices refused and /dev/zero read, want:\n%s", text)
			}
		})
	}
}

// TestDevicesUserNamespace (root, running bashcall as nobody): in a user
// namespace, a mount below /dev that came nodev keeps a locked flag; the
// launcher puts /dev's tree back as it was rather than clear it, and the
// call runs, reading /dev/zero.
func TestDevicesUserNamespace(t *testing.T) {
	for _, launcher := range []string{"native", "go"} {
		t.Run(launcher, func(t *testing.T) {
			e := newConfinedEnv(t, "").asNobody()
			if launcher == "go" {
				e.extraEnv = []string{"BASHCALL_LAUNCHER=go"}
			}
			under, err := os.MkdirTemp("/dev", "bashcall-test-")
			if err != nil {
				t.Skipf("no directory in /dev: %v", err)
			}
			t.Cleanup(func() { os.Remove(under) })
			if err := unix.Mount("tmpfs", under, "tmpfs", unix.MS_NODEV, "size=1m"); err != nil {
				t.Skipf("mount: %v", err)
			}
			t.Cleanup(func() { unix.Unmount(under, unix.MNT_DETACH) })
			text := e.call(bashReq("head -c 3 /dev/zero | wc -c; grep -q ' "+under+" ' /proc/self/mountinfo && echo seen", "")).text()
			if text != "3\nseen\n" {
				t.Errorf("as nobody with a nodev mount below /dev: %q", text)
			}
		})
	}
}

// TestDevicesInDevShm (root): /dev/shm, which the read grant gives whole,
// refuses devices too (a chroot built there, with /dev bound into it),
// while a writable root inside /dev, a directory of devices the user
// granted, keeps them.
func TestDevicesInDevShm(t *testing.T) {
	for _, launcher := range []string{"native", "go"} {
		t.Run(launcher, func(t *testing.T) {
			tmp := func(dir string) string {
				d, err := os.MkdirTemp(dir, "bashcall-test-")
				if err != nil {
					t.Skipf("no directory in %s: %v", dir, err)
				}
				t.Cleanup(func() { os.RemoveAll(d) })
				return d
			}
			granted := tmp("/dev")
			e := newConfinedEnv(t, "[sandbox]\nwritable_roots = ["+jsonString(granted)+"]\n")
			rootMountNS(t)
			if launcher == "go" {
				e.extraEnv = []string{"BASHCALL_LAUNCHER=go"}
			}
			shm := tmp("/dev/shm")
			bound := filepath.Join(shm, "dev")
			os.Mkdir(bound, 0o755)
			if err := unix.Mount("/dev", bound, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				t.Skipf("bind mount: %v", err)
			}
			t.Cleanup(func() { unix.Unmount(bound, unix.MNT_DETACH) })
			for _, p := range []string{filepath.Join(shm, "zero"), filepath.Join(granted, "zero")} {
				if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
					t.Skipf("mknod: %v", err)
				}
			}
			script := ""
			for _, p := range []string{filepath.Join(bound, "zero"), filepath.Join(shm, "zero"), filepath.Join(granted, "zero"), "/dev/null"} {
				script += "head -c 3 " + p + " | wc -c; "
			}
			text := e.call(bashReq(script+"echo end", "")).text()
			if n := strings.Count(text, "Permission denied"); n != 2 || strings.Count(text, "3\n") != 1 {
				t.Errorf("2 devices in /dev/shm refused, the granted one read, want:\n%s", text)
			}
		})
	}
}

// TestDenyReadPasswdHome: where $HOME names another directory than the
// user's home in /etc/passwd, each "~" entry of deny_read is withheld
// under both: the keys ssh and git use are in the latter.
func TestDenyReadPasswdHome(t *testing.T) {
	own := passwdHome(os.Getuid())
	if !filepath.IsAbs(own) {
		t.Skipf("no home in /etc/passwd for uid %d", os.Getuid())
	}
	env := func(home string) func(string) string {
		return func(k string) string {
			if k == "HOME" {
				return home
			}
			return ""
		}
	}
	got := denyReadOf([]string{"~/.ssh", "/abs", "~"}, env("/elsewhere"))
	want := []string{"~/.ssh", "/abs", "~", filepath.Join(own, ".ssh"), own}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("deny_read %q, want %q", got, want)
	}
	if got := denyReadOf([]string{"~/.ssh"}, env(own)); len(got) != 1 {
		t.Errorf("with HOME the passwd home: %q", got)
	}

	requireABI(t, 1)
	name := fmt.Sprintf(".bashcall-test-%d", os.Getpid())
	secret := filepath.Join(own, name)
	if err := os.WriteFile(secret, []byte("PASSWD-HOME-SECRET\n"), 0o600); err != nil {
		t.Skipf("cannot write in %s: %v", own, err)
	}
	t.Cleanup(func() { os.Remove(secret) })
	e := newConfinedEnv(t, "[sandbox]\ndeny_read = [\"~/"+name+"\"]\n")
	os.MkdirAll(filepath.Join(e.dir, "home"), 0o755)
	e.extraEnv = []string{"HOME=" + filepath.Join(e.dir, "home")}
	if text := e.call(bashReq("cat "+secret+"; echo ran", "")).text(); strings.Contains(text, "SECRET") || !strings.Contains(text, "ran") {
		t.Errorf("the passwd home's deny_read path: %q", text)
	}
}

// setCount sets a count field of whichever width the architecture gives.
func setCount[T uint32 | uint64](p *T, n int) { *p = T(n) }
