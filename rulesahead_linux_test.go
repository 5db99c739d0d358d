package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// aheadEnv is a home with a withheld ~/.ssh and a readable file, and a
// state dir with its spill directory, for rulesets made ahead.
type aheadEnv struct {
	home, state string
	grant       readGrant
}

// requireRulesAhead skips a test where no ruleset is made ahead: it is
// made for the native launcher only.
func requireRulesAhead(t *testing.T) {
	t.Helper()
	requireABI(t, 1)
	if _, err := nativeLauncher(); err != nil || os.Getenv("BASHCALL_LAUNCHER") == "go" {
		t.Skipf("rulesets are made ahead for the native launcher only, which is not used here (%v)", err)
	}
}

func newAheadEnv(t *testing.T) *aheadEnv {
	t.Helper()
	requireRulesAhead(t)
	dir := t.TempDir()
	a := &aheadEnv{home: filepath.Join(dir, "home"), state: filepath.Join(dir, "state")}
	for _, d := range []string{filepath.Join(a.home, ".ssh"), filepath.Join(a.state, "spill")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(a.home, ".ssh", "key"), []byte("THE-KEY\n"), 0o600)
	os.WriteFile(filepath.Join(a.home, "notes"), []byte("notes\n"), 0o644)
	a.grant = grantFor([]string{"~/.ssh"}, a.home, a.state)
	t.Cleanup(func() {
		rulesAhead.Lock()
		dropRulesAhead()
		rulesAhead.Unlock()
		closeSpentWatch()
	})
	return a
}

// run runs script through the native launcher with the env's grant and
// more launcher arguments, and reports whether it took the ruleset made
// ahead.
func (a *aheadEnv) run(t *testing.T, script string, more ...string) (string, bool) {
	t.Helper()
	args := []string{"-w", "/dev/null"}
	for _, d := range a.grant.Denied {
		args = append(args, "-deny", d)
	}
	for _, f := range a.grant.FilesOnly {
		args = append(args, "-rf", f)
	}
	args = append(append(args, more...), "--", "/bin/sh", "-c", script)
	rulesAhead.Lock()
	before := rulesAhead.taken
	rulesAhead.Unlock()
	res, out, err := launch(t, false, args...)
	if err != nil || res.RunnerFailure != "" {
		t.Fatalf("launch: %+v, %v\n%s", res, err, out)
	}
	rulesAhead.Lock()
	defer rulesAhead.Unlock()
	return out, rulesAhead.taken > before
}

// TestRulesAhead: a ruleset made ahead is taken by a call that plans the
// same rules from the same filesystem, and confines it as a ruleset built
// at the call does; after each change that a ruleset made ahead would get
// wrong, the call builds its own, which reads what it now should.
func TestRulesAhead(t *testing.T) {
	a := newAheadEnv(t)
	key, notes := filepath.Join(a.home, ".ssh", "key"), filepath.Join(a.home, "notes")
	work := t.TempDir()
	probe := fmt.Sprintf("cat %s; cat %s; echo written > %s/f && cat %s/f", key, notes, work, work)
	// Untouched: taken. Its directories are the temp dir's ancestors,
	// which other programs may change meanwhile: a few tries.
	taken := false
	for i := 0; i < 3 && !taken; i++ {
		prepareReadRules(a.grant, false)
		var out string
		out, taken = a.run(t, probe, "-w", work)
		if strings.Contains(out, "THE-KEY") || !strings.Contains(out, "notes\n") || !strings.Contains(out, "written\n") {
			t.Errorf("with the ruleset made ahead: %q", out)
		}
	}
	if !taken {
		t.Fatal("a call that plans the same rules did not take the ruleset made ahead")
	}
	if _, taken := a.run(t, probe); taken {
		t.Error("a ruleset made ahead was taken twice")
	}

	sub := filepath.Join(a.home, "sub")
	os.Mkdir(sub, 0o755)
	for _, tt := range []struct {
		name   string
		setup  func(t *testing.T) // before the ruleset is made ahead
		change func(t *testing.T)
		script string
		want   string
		more   []string
	}{
		{"an entry added", nil, func(t *testing.T) {
			os.Mkdir(filepath.Join(a.home, "new"), 0o755)
			os.WriteFile(filepath.Join(a.home, "new", "f"), []byte("fresh\n"), 0o644)
		}, "cat " + filepath.Join(a.home, "new", "f"), "fresh\n", nil},
		{"an entry replaced under its name", nil, func(t *testing.T) {
			os.WriteFile(notes+".new", []byte("replaced\n"), 0o644)
			if err := os.Rename(notes+".new", notes); err != nil {
				t.Fatal(err)
			}
		}, "cat " + notes, "replaced\n", nil},
		{"an entry removed and made again", nil, func(t *testing.T) {
			os.Remove(notes)
			os.WriteFile(notes, []byte("made again\n"), 0o644)
		}, "cat " + notes, "made again\n", nil},
		{"the spill directory replaced", nil, func(t *testing.T) {
			spill := a.grant.FilesOnly[0]
			os.Rename(spill, spill+".old")
			os.Mkdir(spill, 0o700)
			os.WriteFile(filepath.Join(spill, "x"), []byte("spilled\n"), 0o600)
		}, "cat " + filepath.Join(a.grant.FilesOnly[0], "x"), "spilled\n", nil},
		{"another path withheld", nil, func(t *testing.T) {}, "cat " + notes + " 2>/dev/null || echo withheld", "withheld\n",
			[]string{"-deny", notes}},
		{"a split directory replaced under its path", nil, func(t *testing.T) {
			old := a.home + ".old"
			if err := os.Rename(a.home, old); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				os.RemoveAll(a.home)
				os.Rename(old, a.home)
			})
			os.MkdirAll(filepath.Join(a.home, ".ssh"), 0o700)
			os.WriteFile(key, []byte("THE-NEW-KEY\n"), 0o600)
			os.WriteFile(notes, []byte("new notes\n"), 0o644)
		}, "cat " + key + " 2>/dev/null; cat " + notes, "new notes\n", nil},
		{"an entry renamed over another", func(t *testing.T) {
			os.WriteFile(notes+".new", []byte("renamed over\n"), 0o644)
		}, func(t *testing.T) {
			if err := os.Rename(notes+".new", notes); err != nil {
				t.Fatal(err)
			}
		}, "cat " + notes, "renamed over\n", nil},
		{"an entry moved in", func(t *testing.T) {
			os.WriteFile(filepath.Join(sub, "in"), []byte("moved in\n"), 0o644)
		}, func(t *testing.T) {
			if err := os.Rename(filepath.Join(sub, "in"), filepath.Join(a.home, "in")); err != nil {
				t.Fatal(err)
			}
		}, "cat " + filepath.Join(a.home, "in"), "moved in\n", nil},
		{"an entry moved out", func(t *testing.T) {
			os.Mkdir(filepath.Join(a.home, "out"), 0o755)
		}, func(t *testing.T) {
			if err := os.Rename(filepath.Join(a.home, "out"), filepath.Join(sub, "out")); err != nil {
				t.Fatal(err)
			}
		}, "ls -d " + filepath.Join(sub, "out"), filepath.Join(sub, "out") + "\n", nil},
		{"an entry's mode changed", nil, func(t *testing.T) {
			os.Chmod(notes, 0o640)
		}, "cat " + notes + " >/dev/null && echo read", "read\n", nil},
		{"an entry removed", func(t *testing.T) {
			os.Mkdir(filepath.Join(a.home, "gone"), 0o755)
		}, func(t *testing.T) {
			if err := os.Remove(filepath.Join(a.home, "gone")); err != nil {
				t.Fatal(err)
			}
		}, "ls " + filepath.Join(a.home, "gone") + " 2>/dev/null || echo gone", "gone\n", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup(t)
			}
			prepareReadRules(a.grant, false)
			tt.change(t)
			out, taken := a.run(t, tt.script, tt.more...)
			if taken {
				t.Error("the ruleset made ahead was taken")
			}
			if out != tt.want {
				t.Errorf("got %q, want %q", out, tt.want)
			}
		})
	}
	t.Run("network off", func(t *testing.T) {
		if requireABI(t, 4); !seccompEnforced() {
			t.Skip("network = off needs the seccomp filter")
		}
		prepareReadRules(a.grant, false)
		if _, taken := a.run(t, "true", "-net", "off"); taken {
			t.Error("a ruleset made ahead without network rights was taken by a call with network off")
		}
	})
	t.Run("unmounted", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("mounting needs root")
		}
		mnt := filepath.Join(a.home, "mnt")
		os.Mkdir(mnt, 0o755)
		os.WriteFile(filepath.Join(mnt, "under"), []byte("under the mount\n"), 0o644)
		if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, ""); err != nil {
			t.Skipf("mount: %v", err)
		}
		mounted := true
		defer func() {
			if mounted {
				unix.Unmount(mnt, 0)
			}
		}()
		prepareReadRules(a.grant, false)
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Fatal(err)
		}
		mounted = false
		out, taken := a.run(t, "cat "+filepath.Join(mnt, "under"))
		if taken {
			t.Error("the ruleset made ahead was taken after an unmount")
		}
		if out != "under the mount\n" {
			t.Errorf("got %q", out)
		}
	})
}

// holdsRuleset reports whether pid holds a Landlock ruleset.
func holdsRuleset(pid int) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fd); l == "anon_inode:[landlock-ruleset]" || l == "anon_inode:landlock-ruleset" {
			return true
		}
	}
	return false
}

// TestWarmChildReadRules: a server's warm child confined by default makes
// its call's read rules while it waits; its call reads what a cold call
// reads, a file made after the child started included, and not ~/.ssh. A
// child whose calls run unconfined makes none.
func TestWarmChildReadRules(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("the native launcher is built for amd64 and arm64")
	}
	for _, confined := range []bool{true, false} {
		var e *testEnv
		if confined {
			e = newConfinedEnv(t, "")
		} else {
			e = newTestEnv(t, "")
		}
		home := filepath.Join(e.dir, "home")
		os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
		os.WriteFile(filepath.Join(home, ".ssh", "id"), []byte("THE-KEY\n"), 0o600)
		os.WriteFile(filepath.Join(home, "notes"), []byte("notes\n"), 0o644)
		e.extraEnv = []string{"HOME=" + home}
		warmOnce(t, e)
		for _, later := range []bool{false, true} {
			c := e.cmd("-warm")
			stdin, out := startWaiting(t, c)
			want := confined && os.Getenv("BASHCALL_LAUNCHER") != "go"
			if got := holdsRuleset(c.Process.Pid); got != want {
				t.Errorf("confined=%v: the waiting child holds a ruleset: %v, want %v", confined, got, want)
			}
			script := "cat ~/.ssh/id; cat ~/notes"
			wantText := "notes\n"
			if later {
				os.WriteFile(filepath.Join(home, "later"), []byte("made later\n"), 0o644)
				script, wantText = script+"; cat ~/later", "notes\nmade later\n"
			}
			io.WriteString(stdin, bashReq(script, ""))
			stdin.Close()
			waitExit(t, c.Process)
			text := decodeResponse(t, out()).text()
			if confined && (strings.Contains(text, "THE-KEY") || !strings.Contains(text, wantText)) {
				t.Errorf("later=%v: %q", later, text)
			}
			if !confined && !strings.Contains(text, "THE-KEY\n"+wantText) {
				t.Errorf("unconfined, later=%v: %q", later, text)
			}
		}
	}
}

// TestStampedList: the listing behind every confined call's read rules
// gives what os.ReadDir gives, entry types included.
func TestStampedList(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
	os.Symlink("f", filepath.Join(dir, "l"))
	syscall.Mkfifo(filepath.Join(dir, "p"), 0o644)
	for _, d := range []string{dir, "/", "/dev", "/proc/self"} {
		want, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var stamps []dirStamp
		got, err := stampedList(&stamps, nil, -1)(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || len(stamps) != 1 {
			t.Fatalf("%s: %d entries and %d stamps, want %d and 1", d, len(got), len(stamps), len(want))
		}
		for i := range want {
			if got[i].Name() != want[i].Name() || got[i].Type() != want[i].Type() || got[i].IsDir() != want[i].IsDir() {
				t.Errorf("%s: entry %d is %q %v, want %q %v", d, i, got[i].Name(), got[i].Type(), want[i].Name(), want[i].Type())
			}
		}
	}
	// A listing that fails leaves a stamp that says so.
	var stamps []dirStamp
	if _, err := stampedList(&stamps, nil, -1)(filepath.Join(dir, "f")); err == nil || len(stamps) != 1 || !stamps[0].unlisted {
		t.Errorf("listing a file: %v, stamps %+v; want an error and one unlisted stamp", err, stamps)
	}
}

// TestRulesAheadChecked: a ruleset is made ahead only from what the
// listing saw (an entry replaced between the listing and its rule gives
// it up), only on filesystems whose inode numbers name one file, and
// without rules on regular files, which the call adds; one the call does
// not take is let go of.
func TestRulesAheadChecked(t *testing.T) {
	a := newAheadEnv(t)
	abi := requireABI(t, 1)
	d := filepath.Join(a.home, "d")
	os.Mkdir(d, 0o755)
	notify, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(notify)
	plan := func(notify int) (rulesetPlan, []dirStamp, map[string]uint64) {
		inos := map[string]uint64{}
		p, dirs := planStamped(&launchSpec{reads: a.grant}, abi, inos, notify)
		return p, dirs, inos
	}
	if p, dirs, inos := plan(-1); true {
		if rfd, _, ok := makeAhead(p, abi, dirs, inos, withheldOf(a.grant)); ok {
			unix.Close(rfd)
			t.Error("a ruleset was made ahead of a listing not watched")
		}
	}
	p, dirs, inos := plan(notify)
	rfd, later, ok := makeAhead(p, abi, dirs, inos, withheldOf(a.grant))
	if !ok {
		t.Fatal("no ruleset made ahead of an untouched listing")
	}
	unix.Close(rfd)
	// A split directory that could not be listed grants nothing beneath
	// it, until it can be: no ruleset is made ahead of that.
	failed := append(slices.Clone(dirs), dirStamp{path: filepath.Join(a.home, "locked"), fsType: unix.TMPFS_MAGIC, watched: true, unlisted: true})
	if rfd, _, ok := makeAhead(p, abi, failed, inos, withheldOf(a.grant)); ok {
		unix.Close(rfd)
		t.Error("a ruleset was made ahead of a listing that failed")
	}
	var files []int
	for i, r := range p.Rules {
		if fi, err := os.Lstat(r.Path); err == nil && fi.Mode().IsRegular() {
			files = append(files, i)
		}
	}
	if len(files) == 0 || !slices.Equal(later, files) {
		t.Errorf("rules left for the call: %v, want the regular files' %v", later, files)
	}

	os.Rename(d, d+".old")
	os.Mkdir(d, 0o755)
	if rfd, _, ok := makeAhead(p, abi, dirs, inos, withheldOf(a.grant)); ok {
		unix.Close(rfd)
		t.Error("a ruleset was made ahead with an entry replaced since its listing")
	}

	p, dirs, inos = plan(notify)
	for i := range dirs {
		dirs[i].fsType = unix.OVERLAYFS_SUPER_MAGIC
	}
	if rfd, _, ok := makeAhead(p, abi, dirs, inos, withheldOf(a.grant)); ok {
		unix.Close(rfd)
		t.Error("a ruleset was made ahead on overlayfs")
	}

	prepareReadRules(a.grant, false)
	if _, out, err := launch(t, true, "-w", "/dev/null", "--", "/bin/true"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	rulesAhead.Lock()
	left := rulesAhead.mounts >= 0
	rulesAhead.Unlock()
	if left {
		t.Error("a call through the Go launcher left the ruleset made ahead held")
	}
}

// TestWarmChildSplitDirMode: whether a split directory can be listed
// decides whether anything beneath it is granted. A warm child, run as an
// unprivileged user, whose home is made unlistable (or listable) after
// its warm-up reads what a cold call would.
func TestWarmChildSplitDirMode(t *testing.T) {
	requireRulesAhead(t)
	for _, tt := range []struct {
		name        string
		before, now os.FileMode
		ahead       bool // a ruleset is made ahead
		want        string
	}{
		{"made unlistable", 0o755, 0o311, true, "Permission denied"},
		{"made listable", 0o311, 0o755, false, "notes\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newConfinedEnv(t, "").asNobody()
			// The user lists every directory above its home, so that a
			// ruleset can be made ahead at all.
			os.Chmod(testBase, 0o755)
			t.Cleanup(func() { os.Chmod(testBase, 0o711) })
			home := e.dir // asNobody's HOME
			os.Mkdir(filepath.Join(home, ".ssh"), 0o700)
			os.WriteFile(filepath.Join(home, "notes"), []byte("notes\n"), 0o644)
			for _, p := range []string{".ssh", "notes"} {
				os.Chown(filepath.Join(home, p), nobodyID, nobodyID)
			}
			os.Chmod(home, tt.before)
			t.Cleanup(func() { os.Chmod(home, 0o755) })
			warmOnce(t, e)
			c := e.cmd("-warm")
			stdin, out := startWaiting(t, c)
			if got := holdsRuleset(c.Process.Pid); got != tt.ahead {
				t.Fatalf("the waiting child holds a ruleset made ahead: %v, want %v", got, tt.ahead)
			}
			if err := os.Chmod(home, tt.now); err != nil {
				t.Fatal(err)
			}
			script := "cat ~/notes 2>&1"
			if cold := e.call(bashReq(script, "")).text(); !strings.Contains(cold, tt.want) {
				t.Fatalf("a cold call got %q, want %q in it", cold, tt.want)
			}
			io.WriteString(stdin, bashReq(script, ""))
			stdin.Close()
			waitExit(t, c.Process)
			if text := decodeResponse(t, out()).text(); !strings.Contains(text, tt.want) {
				t.Errorf("got %q, want %q in it", text, tt.want)
			}
		})
	}
}

// watchesRoot reports whether process pid has an inotify watch on "/",
// as a warm child's watch of the split directories has (a bash_output
// wait watches with one of its own, on its task's directory).
func watchesRoot(t *testing.T, pid int) bool {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/", &st); err != nil {
		t.Fatal(err)
	}
	root := fmt.Sprintf(" ino:%x ", st.Ino)
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fd); l != "anon_inode:inotify" {
			continue
		}
		info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, filepath.Base(fd)))
		if strings.Contains(string(info), root) {
			return true
		}
	}
	return false
}

// TestWarmChildLetsGoOfWatch: a call that runs on does not keep the
// inotify instance its warm child watched with (the user has 128): not a
// command that runs on, a call that launches nothing and waits (at once),
// nor one that waits for its approval (after rulesAheadLife).
func TestWarmChildLetsGoOfWatch(t *testing.T) {
	requireRulesAhead(t)
	approver := filepath.Join(testBase, fmt.Sprintf("approver-%d", time.Now().UnixNano()))
	os.WriteFile(approver, []byte("#!/bin/sh\ncat > /dev/null; sleep 3; echo allowed-once\n"), 0o755)
	escalating := `{"name":"bash","arguments":{"command":"echo x > out.txt && echo wrote","description":"d",` +
		`"sandbox_permissions":"workspace-write","justification":"It must write the build output."}}`
	for _, tt := range []struct {
		name, config, req string
		within            time.Duration
		want              string
	}{
		{"a command running", "", bashReq("sleep 2.5", ""), 2 * time.Second, "(no output)"},
		{"a wait for a task", "", outputReq("bash-1", "", `"wait":true,"timeout_ms":2500`), 700 * time.Millisecond, "[status: running]"},
		{"an approval", "[sandbox]\nmode = \"read-only\"\n[approval]\ncommand = [" + jsonString(approver) + "]\n", escalating,
			rulesAheadLife + time.Second, "wrote"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newConfinedEnv(t, tt.config)
			warmOnce(t, e)
			if r := e.call(startReq("sleep 30", "")); r.IsError {
				t.Fatalf("%+v", r)
			}
			c := e.cmd("-warm")
			stdin, out := startWaiting(t, c)
			watching := func() bool { return watchesRoot(t, c.Process.Pid) }
			if !watching() {
				t.Fatal("the waiting child does not watch")
			}
			io.WriteString(stdin, tt.req)
			stdin.Close()
			waitFor(t, tt.within, "the call to let go of its inotify instance", func() bool { return !watching() })
			waitExit(t, c.Process)
			if text := decodeResponse(t, out()).text(); !strings.Contains(text, tt.want) {
				t.Errorf("got %q, want %q in it", text, tt.want)
			}
		})
	}
}
