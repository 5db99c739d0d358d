package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWorkspaceList: the state dir's list of pinned workspaces gets each
// workspace once per session, at its pin; other sessions' workspaces are
// read from it, newest first, without the caller's own, at most
// maxOtherWorkspaces, skipping a line being written; a state dir from
// before the list gets one built from its pins.
func TestWorkspaceList(t *testing.T) {
	inv := &invocation{stateDir: t.TempDir()}
	base, _ := filepath.EvalSymlinks(t.TempDir())
	var ws []string
	for i := 0; i < 3; i++ {
		d := filepath.Join(base, fmt.Sprint("w", i))
		os.Mkdir(d, 0o700)
		ws = append(ws, d)
		if err := inv.pinWorkspace(fmt.Sprint("s", i), d, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := inv.pinWorkspace("s1", ws[1], ws[1]); err != nil { // pinned already
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{ws[2], ws[1]}, inv.otherWorkspaces(ws[0], []string{"/"})); d != "" {
		t.Errorf("other workspaces (-want +got):\n%s", d)
	}
	if b, _ := os.ReadFile(inv.workspaceList()); strings.Count(string(b), "\n") != 3 {
		t.Errorf("the list holds %q, want the 3 pins", b)
	}

	os.Remove(inv.workspaceList())
	got := inv.otherWorkspaces(ws[0], []string{"/"})
	if len(got) != 2 || !contains(got, ws[1]) || !contains(got, ws[2]) {
		t.Errorf("without a list: %q, want %q and %q", got, ws[1], ws[2])
	}
	if b, err := os.ReadFile(inv.workspaceList()); err != nil || strings.Count(string(b), "\n") != 3 {
		t.Errorf("the list rebuilt from the pins: %q, %v", b, err)
	}

	// A line cut short (a full disk) does not swallow the next one.
	os.WriteFile(inv.workspaceList(), []byte(`"`+ws[1]+"\n"+`"/cut-sh`), 0o600)
	d := filepath.Join(base, "w3")
	os.Mkdir(d, 0o700)
	if err := inv.pinWorkspace("s3", d, d); err != nil {
		t.Fatal(err)
	}
	if got := inv.otherWorkspaces(ws[0], []string{"/"}); !contains(got, d) {
		t.Errorf("after a torn line: %q, want %q among them", got, d)
	}

	// Only those in a writable dir count, each once, before the cap.
	var b strings.Builder
	fmt.Fprintf(&b, "%q\n", "/tmp/early")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "%q\n%q\n", "/home/u/w", fmt.Sprint("/home/u/x", i))
	}
	os.WriteFile(inv.workspaceList(), []byte(b.String()), 0o600)
	if got := inv.otherWorkspaces("", []string{"/tmp"}); len(got) != 1 || got[0] != "/tmp/early" {
		t.Errorf("in /tmp, behind 601 lines elsewhere: %q, want [/tmp/early]", got)
	}
	if got := inv.otherWorkspaces("", []string{"/home/u/w"}); len(got) != 1 {
		t.Errorf("a workspace listed 300 times: %q, want it once", got)
	}

	b.Reset()
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "%q\n", fmt.Sprint("/w/", i))
	}
	b.WriteString(`"/w/partial`)
	os.WriteFile(inv.workspaceList(), []byte(b.String()), 0o600)
	got = inv.otherWorkspaces("/w/299", []string{"/"})
	if len(got) != maxOtherWorkspaces || got[0] != "/w/298" || got[len(got)-1] != "/w/43" {
		t.Errorf("from 300 listed: %d, first %q, last %q; want %d from /w/298 to /w/43", len(got), got[0], got[len(got)-1], maxOtherWorkspaces)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestWorkspaceListConcurrentPins: first calls of many sessions at once,
// in a state dir whose sessions pinned workspaces before there was a list,
// list every workspace, old and new (the list is built from the pins and
// added to under one lock).
func TestWorkspaceListConcurrentPins(t *testing.T) {
	e := newTestEnv(t, "")
	inv := &invocation{stateDir: e.stateDir}
	if err := os.MkdirAll(e.stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < 2; i++ {
		d := filepath.Join(e.dir, fmt.Sprint("old", i))
		os.Mkdir(d, 0o755)
		c, _ := filepath.EvalSymlinks(d)
		if err := inv.pinWorkspace(fmt.Sprint("old", i), c, c); err != nil {
			t.Fatal(err)
		}
		want = append(want, c)
	}
	os.Remove(inv.workspaceList())
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		d := filepath.Join(e.dir, fmt.Sprint("ws", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		c, _ := filepath.EvalSymlinks(d)
		want = append(want, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.run(fmt.Sprintf(`{"name":"bash","arguments":{"command":"true","description":"x"},"session":{"id":"s%d","cwd":%q}}`, i, d))
			if r.code != 0 || !strings.Contains(r.stdout, `"isError":false`) {
				t.Errorf("call %d: exit %d: %s%s", i, r.code, r.stdout, r.stderr)
			}
		}()
	}
	wg.Wait()
	got := inv.otherWorkspaces("", []string{"/"})
	for _, w := range want {
		if !contains(got, w) {
			t.Errorf("%q is not listed: %q", w, got)
		}
	}
}

// TestWrittenList: the paths a confined call makes writable are listed
// once each, across invocations, and a torn last line does not swallow
// the next one.
func TestWrittenList(t *testing.T) {
	state := t.TempDir()
	a, b, c := "/w/a", "/w/b", "/w/c"
	for i := 0; i < 2; i++ {
		inv := &invocation{stateDir: state}
		listed, err := inv.writtenPaths()
		if err != nil {
			t.Fatal(err)
		}
		if err := inv.noteWritten(listed, []string{a, "/dev/null", b, a}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(state, "written"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`"/torn`)
	f.Close()
	inv := &invocation{stateDir: state}
	if err := inv.noteWritten(nil, []string{c}); err != nil {
		t.Fatal(err)
	}
	got, err := inv.writtenPaths()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{a, "/dev/null", b, c}, got); d != "" {
		t.Errorf("written (-want +got):\n%s", d)
	}
	data, _ := os.ReadFile(filepath.Join(state, "written"))
	if strings.Count(string(data), "\n") != 5 {
		t.Errorf("the list holds empty lines or lacks some:\n%s", data)
	}
}
