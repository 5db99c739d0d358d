package main

// The scan of writable directories for git files to protect, as a
// hostile command can shape them: symlinks on the way, files that are not
// regular, more files than a call protects.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSubmoduleThroughSymlink: a .gitmodules path through a symlink (the
// workspace's own content, which a model can write) neither fails every
// later call of the workspace, as a launcher refusing the symlink on the
// way to the submodule's git dir did, nor leaves that git dir
// unprotected.
func TestSubmoduleThroughSymlink(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, _ := plantEnv(t, m.env)
			newRepo(t, e.workspace)
			newRepo(t, filepath.Join(e.workspace, "real", "sub"))
			if err := os.Symlink("real", filepath.Join(e.workspace, "l")); err != nil {
				t.Fatal(err)
			}
			modules := "[submodule \"x\"]\n\tpath = l/sub\n"
			if err := os.WriteFile(filepath.Join(e.workspace, ".gitmodules"), []byte(modules), 0o644); err != nil {
				t.Fatal(err)
			}
			hook := filepath.Join(e.workspace, "real", "sub", ".git", "hooks", "pre-commit")
			text := e.call(bashReq("echo planted > "+hook+"; echo ran", "")).text()
			if !strings.HasPrefix(text, "ran\n") {
				t.Errorf("call: %q", text)
			}
			if b, err := os.ReadFile(hook); err == nil {
				t.Errorf("the submodule's hook was planted: %q", b)
			}
		})
	}
}

// TestGitFilesNotRegular: what any session's command can put where the
// scan before every confined call reads git's files (a FIFO as
// .gitmodules, or as the commondir a .git file leads to, in a directory
// every session writes) does not hang the next call, and a sparse
// .gitmodules of gigabytes is not read; in the call's own workspace,
// where it would hide the submodules to protect, it refuses the call.
func TestGitFilesNotRegular(t *testing.T) {
	requireABI(t, 1)
	shared, err := os.MkdirTemp(testBase, "shared-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shared)
	for _, tt := range []struct {
		plant, want string
		// running: what a command leaves is there only while it runs
		// (a repository it made is made harmless after the call, and at
		// each sweep of a task), so it is planted unconfined, as it is
		// while a task runs, when another call scans.
		running bool
	}{
		{"cd " + shared + " && mkfifo .gitmodules", "ran\n", false},
		{"cd " + shared + " && mkdir g && touch g/HEAD && mkfifo g/commondir && echo 'gitdir: g' > .git", "ran\n", true},
		{"cd " + shared + " && mkdir g && touch g/HEAD && mkfifo g/commondir && echo 'gitdir: g' > .git", "ran\n", false},
		{"cd " + shared + " && truncate -s 2G .gitmodules", "ran\n", false},
		{"truncate -s 2G .gitmodules", "Error: refusing to run under workspace-write: too many protected git files under ", false},
	} {
		t.Run(tt.plant, func(t *testing.T) {
			os.RemoveAll(shared)
			os.Mkdir(shared, 0o755)
			e := newConfinedEnv(t, "[sandbox]\nwritable_roots = ["+jsonString(shared)+"]\n")
			if tt.running {
				if out, err := exec.Command("bash", "-c", tt.plant).CombinedOutput(); err != nil {
					t.Fatalf("planting: %v %s", err, out)
				}
			} else if text := e.call(bashReq(tt.plant+" && echo planted", "")).text(); !strings.HasPrefix(text, "planted\n") {
				t.Fatalf("planting: %q", text)
			}
			c := e.cmd("-text")
			c.Stdin = strings.NewReader(bashReq("echo ran", ""))
			done := make(chan []byte, 1)
			go func() { out, _ := c.Output(); done <- out }()
			select {
			case out := <-done:
				if !strings.HasPrefix(string(out), tt.want) {
					t.Errorf("the next call: %q, want %q", out, tt.want)
				}
			case <-time.After(20 * time.Second):
				c.Process.Kill()
				<-done
				t.Fatal("the next call hung")
			}
		})
	}
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, nil, 0o600); err != nil || os.Truncate(big, 2<<30) != nil {
		t.Fatal(err)
	}
	if b, err := readSmall(big, 1<<20); !errors.Is(err, errTooLarge) || b != nil {
		t.Errorf("readSmall of a 2 GiB file: %d bytes, %v", len(b), err)
	}
}

// TestGuardBudgetPerDirectory: a writable directory that any session's
// command can fill (here a writable root) with more git files than a call
// protects does not refuse other sessions' calls, nor take the budget of
// the call's own workspace, whose protection stays whole; the workspace
// over its own budget still refuses its call. Both mechanisms.
func TestGuardBudgetPerDirectory(t *testing.T) {
	requireABI(t, 1)
	shared, err := os.MkdirTemp(testBase, "shared-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shared)
	worktrees := func(dir string) {
		for i := range maxGuardEntries/3 + 1 {
			if err := os.MkdirAll(filepath.Join(dir, ".git", "worktrees", fmt.Sprint("w", i)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	worktrees(shared)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e := newConfinedEnv(t, "[sandbox]\nwritable_roots = ["+jsonString(shared)+"]\n")
			e.extraEnv = m.env
			newRepo(t, e.workspace)
			hook := filepath.Join(e.workspace, ".git", "hooks", "pre-commit")
			r := e.call(bashReq("echo planted > "+hook+"; echo ran", ""))
			if !strings.HasPrefix(r.text(), "ran\n") {
				t.Errorf("a call beside a full writable root: %q", r.text())
			}
			if b, err := os.ReadFile(hook); err == nil {
				t.Errorf("the workspace's hook was planted: %q", b)
			}
			worktrees(e.workspace)
			if text := e.call(bashReq("echo ran", "")).text(); !strings.Contains(text, "too many protected git files under "+strconv.Quote(e.workspace)) {
				t.Errorf("a call in a full workspace: %q", text)
			}
		})
	}
}

// TestGuardSharedDirectory: what a command can put in a writable directory
// that every session shares (here two writable roots) does not reach
// another session's protection: a .gitmodules listing one symlink into
// the call's workspace many times does not spend the workspace's budget
// (the call runs); worktrees enough to spend the shared directory's
// budget leave another session's workspace in it protected; and a .git
// file there naming a directory of the call's workspace does not have
// that directory's files reverted.
func TestGuardSharedDirectory(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			var shared [2]string
			for i := range shared {
				dir, err := os.MkdirTemp(testBase, "shared-")
				if err != nil {
					t.Fatal(err)
				}
				defer os.RemoveAll(dir)
				shared[i] = dir
			}
			e := newConfinedEnv(t, "[sandbox]\nwritable_roots = ["+jsonString(shared[0])+", "+jsonString(shared[1])+"]\n")
			e.extraEnv = m.env
			newRepo(t, e.workspace)
			os.Mkdir(filepath.Join(e.workspace, "src"), 0o755)
			os.Symlink(e.workspace, filepath.Join(shared[0], "l"))
			os.WriteFile(filepath.Join(shared[0], ".gitmodules"), []byte(strings.Repeat("path = l\n", 3*maxGuardEntries)), 0o644)
			os.WriteFile(filepath.Join(shared[0], ".git"), []byte("gitdir: "+filepath.Join(e.workspace, "src")+"\n"), 0o644)
			wsB := filepath.Join(shared[1], "wsB")
			newRepo(t, wsB)
			if text := e.call(sessionCall("echo pinned", "B", wsB, "")).text(); text != "pinned\n" {
				t.Fatalf("session B's call: %q", text)
			}
			newRepo(t, shared[1])
			for i := range maxGuardEntries/3 + 1 {
				os.MkdirAll(filepath.Join(shared[1], ".git", "worktrees", fmt.Sprint("w", i)), 0o755)
			}
			hookB := filepath.Join(wsB, ".git", "hooks", "pre-commit")
			r := e.call(sessionCall("echo planted > "+hookB+"; echo mine > src/config; echo ran", "A", e.workspace, ""))
			if !strings.Contains(r.text(), "ran\n") {
				t.Errorf("session A's call: %q", r.text())
			}
			if b, err := os.ReadFile(hookB); err == nil {
				t.Errorf("session B's hook was planted: %q", b)
			}
			if b, err := os.ReadFile(filepath.Join(e.workspace, "src", "config")); string(b) != "mine\n" {
				t.Errorf("session A's own src/config: %q, %v", b, err)
			}
		})
	}
	if _, err := readSmall(os.DevNull, 1<<20); err == nil {
		t.Error("readSmall read a device")
	}
}

// TestGuardNotClaimed: no top or path that a shared directory's spent
// budget skipped goes unprotected: a .git file in a shared directory
// leading, through a git dir of 700 worktrees, to the common dir of
// another session's workspace there leaves that workspace protected by
// its own budget; a shared directory's .gitmodules naming the call's own
// nested submodule through a symlink leaves the submodule's .git file
// protected; and a workspace that is a submodule checkout in a shared
// directory, its git dir beside it there, keeps its .git file protected.
func TestGuardNotClaimed(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, shared := sharedRootEnv(t, m.env)
			// Session B's workspace in the shared directory, and the
			// junk that spends the shared directory's budget.
			wsB := filepath.Join(shared, "wsB")
			newRepo(t, wsB)
			if text := e.call(sessionCall("echo pinned", "B", wsB, "")).text(); text != "pinned\n" {
				t.Fatalf("session B's call: %q", text)
			}
			evil := filepath.Join(shared, "evil")
			for i := range 700 {
				os.MkdirAll(filepath.Join(evil, "worktrees", fmt.Sprint("w", i)), 0o755)
			}
			os.WriteFile(filepath.Join(evil, "HEAD"), []byte("ref: refs/heads/x\n"), 0o644)
			os.WriteFile(filepath.Join(evil, "commondir"), []byte(filepath.Join(wsB, ".git")+"\n"), 0o644)
			os.WriteFile(filepath.Join(shared, ".git"), []byte("gitdir: "+evil+"\n"), 0o644)
			// The call's own workspace, with a nested submodule that the
			// shared directory names through a symlink.
			newRepo(t, e.workspace)
			subsub := filepath.Join(e.workspace, "sub", "subsub")
			newRepo(t, filepath.Join(e.workspace, ".git", "modules", "x"))
			os.MkdirAll(subsub, 0o755)
			os.WriteFile(filepath.Join(e.workspace, ".gitmodules"), []byte("[submodule \"sub\"]\n\tpath = sub\n"), 0o644)
			os.WriteFile(filepath.Join(e.workspace, "sub", ".gitmodules"), []byte("[submodule \"subsub\"]\n\tpath = subsub\n"), 0o644)
			os.WriteFile(filepath.Join(subsub, ".git"), []byte("gitdir: "+filepath.Join(e.workspace, ".git", "modules", "x", ".git")+"\n"), 0o644)
			os.Symlink(subsub, filepath.Join(shared, "l"))
			os.WriteFile(filepath.Join(shared, ".gitmodules"), []byte("[submodule \"l\"]\n\tpath = l\n"), 0o644)
			hookB := filepath.Join(wsB, ".git", "hooks", "pre-commit")
			attack := fmt.Sprintf("echo planted > %s; echo 'gitdir: /forged' > %s; echo ran", hookB, filepath.Join(subsub, ".git"))
			if text := e.call(sessionCall(attack, "A", e.workspace, "")).text(); !strings.Contains(text, "ran\n") {
				t.Fatalf("session A's call: %q", text)
			}
			if b, err := os.ReadFile(hookB); err == nil {
				t.Errorf("session B's hook was planted: %q", b)
			}
			if b, _ := os.ReadFile(filepath.Join(subsub, ".git")); strings.Contains(string(b), "forged") {
				t.Errorf("the nested submodule's .git file was repointed: %q", b)
			}
			// A workspace that is a submodule checkout beside its git dir.
			proj := filepath.Join(shared, "proj")
			newRepo(t, filepath.Join(proj, ".git", "modules", "sub"))
			os.MkdirAll(filepath.Join(proj, "sub"), 0o755)
			dotGit := filepath.Join(proj, "sub", ".git")
			os.WriteFile(dotGit, []byte("gitdir: ../.git/modules/sub/.git\n"), 0o644)
			e.call(sessionCall("echo 'gitdir: /forged' > .git", "C", filepath.Join(proj, "sub"), ""))
			if b, _ := os.ReadFile(dotGit); strings.Contains(string(b), "forged") {
				t.Errorf("the submodule workspace's .git file was repointed: %q", b)
			}
		})
	}
	deep := t.TempDir()
	p := deep
	for range 40 {
		p = filepath.Join(p, "a")
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	steps := 20
	if _, ok := resolveWithin(p, &steps); ok || steps != 0 {
		t.Errorf("resolveWithin of a path deeper than its steps: ok, %d steps left", steps)
	}
	many := t.TempDir()
	for i := range maxGuardEntries + 1 {
		os.WriteFile(filepath.Join(many, fmt.Sprint(i)), nil, 0o644)
	}
	if entries, err := readDirBounded(many); !errors.Is(err, errTooLarge) || entries != nil {
		t.Errorf("readDirBounded of %d entries: %d, %v", maxGuardEntries+1, len(entries), err)
	}
}

// TestGuardFromGitDirs: what a command can change of a repository's
// files does not change what is protected: a submodule's .git file is
// found from its git dir under .git/modules (core.worktree), however
// .gitmodules was cut or respelled by an earlier call; and a repository
// of the call's own workspace that only another session's worktree (in a
// shared directory) points at has its hooks and config protected.
func TestGuardFromGitDirs(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, shared := sharedRootEnv(t, m.env)
			upstream := filepath.Join(e.dir, "upstream")
			newRepo(t, upstream)
			newRepo(t, e.workspace)
			gitRun(t, e.workspace, "submodule", "add", "-q", upstream, "sub")
			gitRun(t, e.workspace, "commit", "-qm", "add sub")
			for _, cut := range []string{"rm .gitmodules", "sed -i 's/path = sub/Path = \"sub\"/' .gitmodules", "git config -f .gitmodules --remove-section submodule.sub"} {
				e.call(sessionCall(cut, "A", e.workspace, ""))
				e.call(sessionCall("echo 'gitdir: /forged' > sub/.git", "A", e.workspace, ""))
				if b, _ := os.ReadFile(filepath.Join(e.workspace, "sub", ".git")); strings.Contains(string(b), "forged") {
					t.Errorf("after %q, the submodule's .git file was repointed: %q", cut, b)
				}
				gitRun(t, e.workspace, "checkout", "-q", ".gitmodules")
			}
			proj := filepath.Join(e.workspace, "proj")
			newRepo(t, proj)
			wt := filepath.Join(shared, "b")
			gitRun(t, proj, "worktree", "add", "-q", wt, "-b", "b")
			if text := e.call(sessionCall("echo pinned", "B", wt, "")).text(); text != "pinned\n" {
				t.Fatalf("session B's call: %q", text)
			}
			hook := filepath.Join(proj, ".git", "hooks", "post-checkout")
			e.call(sessionCall("echo planted > "+hook+"; git -C proj config core.fsmonitor 'touch /nowhere'", "A", e.workspace, ""))
			checkUnplanted(t, hook, proj)
		})
	}
}

// TestGuardSymlinkedHooks: a .git/hooks that is a symlink (as some setups
// keep hooks in the tree) is put back as it was after the call, under both
// mechanisms. What it leads to is the tree's, as hooks kept in the tree
// are (core.hooksPath): not protected, so that a link planted to a whole
// directory (here the workspace itself, from a git dir under
// .git/modules) cannot make it read-only or have its changes reverted.
func TestGuardSymlinkedHooks(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e := newConfinedEnv(t, "")
			e.extraEnv = m.env
			newRepo(t, e.workspace)
			hooks := filepath.Join(e.workspace, ".git", "hooks")
			os.RemoveAll(hooks)
			os.Mkdir(filepath.Join(e.workspace, "githooks"), 0o755)
			if err := os.Symlink("../githooks", hooks); err != nil {
				t.Fatal(err)
			}
			evil := filepath.Join(e.workspace, ".git", "modules", "evil")
			os.MkdirAll(evil, 0o755)
			os.WriteFile(filepath.Join(evil, "HEAD"), []byte("ref: refs/heads/x\n"), 0o644)
			os.Symlink("../../..", filepath.Join(evil, "hooks"))
			text := e.call(bashReq("echo mine > mine.txt; rm .git/hooks && mkdir .git/hooks && echo planted > .git/hooks/post-checkout; echo ran", "")).text()
			if !strings.HasPrefix(text, "ran\n") {
				t.Errorf("the call: %q", text)
			}
			if target, err := os.Readlink(hooks); err != nil || target != "../githooks" {
				t.Errorf(".git/hooks after the call: %q, %v", target, err)
			}
			if b, _ := os.ReadFile(filepath.Join(e.workspace, "mine.txt")); string(b) != "mine\n" {
				t.Errorf("the workspace, which a planted hooks link leads to, was protected: mine.txt = %q", b)
			}
			// A git dir whose core.worktree names the workspace, whose
			// .git is a directory: that repository is not protected whole.
			os.WriteFile(filepath.Join(evil, "config"), []byte("[core]\n\tworktree = ../../..\n"), 0o644)
			text = e.call(bashReq("git add -A && git commit -qm mine && echo committed", "")).text()
			if !strings.HasPrefix(text, "committed\n") || strings.Contains(text, "reverted") {
				t.Errorf("a commit beside a git dir naming the workspace as its worktree: %q", text)
			}
		})
	}
}

// TestGuardDotGitSymlink: a workspace whose .git is a symlink to its git
// dir (git follows it) has that git dir's hooks and config protected, and
// the symlink put back after the call.
func TestGuardDotGitSymlink(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e := newConfinedEnv(t, "")
			e.extraEnv = m.env
			newRepo(t, e.workspace)
			real := filepath.Join(e.workspace, ".realgit")
			if err := os.Rename(filepath.Join(e.workspace, ".git"), real); err != nil {
				t.Fatal(err)
			}
			os.Symlink(".realgit", filepath.Join(e.workspace, ".git"))
			e.call(bashReq("echo planted > .git/hooks/pre-commit; git config core.fsmonitor 'touch /nowhere'; true", ""))
			checkUnplanted(t, filepath.Join(real, "hooks", "pre-commit"), e.workspace)
			e.call(bashReq("rm .git && ln -s /tmp .git; true", ""))
			if target, err := os.Readlink(filepath.Join(e.workspace, ".git")); err != nil || target != ".realgit" {
				t.Errorf(".git after the call: %q, %v", target, err)
			}
		})
	}
}

// TestSubmodulePaths: .gitmodules is read as git reads it, keys without
// case and values unquoted, each path once, and more than maxSubmodules
// paths say the list is cut (which refuses a call in its own workspace).
func TestSubmodulePaths(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("[submodule \"a\"]\n\tPath = \"a\"\n\tpath = a\n[submodule \"b\"]\n\tPATH=b/c\n\tpath = ../out\n\tpath = /abs\n")
	os.WriteFile(filepath.Join(dir, ".gitmodules"), []byte(b.String()), 0o644)
	if got, complete := submodulePaths(dir); strings.Join(got, ",") != "a,b/c" || !complete {
		t.Errorf("submodulePaths = %q, %v", got, complete)
	}
	for i := range maxSubmodules + 1 {
		fmt.Fprintf(&b, "\tpath = m%d\n", i)
	}
	os.WriteFile(filepath.Join(dir, ".gitmodules"), []byte(b.String()), 0o644)
	if got, complete := submodulePaths(dir); len(got) != maxSubmodules || complete {
		t.Errorf("submodulePaths of %d paths: %d, %v", maxSubmodules+3, len(got), complete)
	}
}

// TestGuardPointerFromShared: a .git symlink or file that a command put in
// a directory every session writes, naming a directory of a session's
// workspace that holds a HEAD (as .git/logs does), or a git dir there
// whose core.worktree names a .git file of the workspace, has nothing of
// the workspace bound, reverted or created in the session's own calls.
func TestGuardPointerFromShared(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		for _, pointer := range []string{"symlink", "file", "core.worktree"} {
			t.Run(m.name+"/"+pointer, func(t *testing.T) {
				e, shared := sharedRootEnv(t, m.env)
				src := filepath.Join(e.workspace, "src")
				os.Mkdir(src, 0o755)
				os.WriteFile(filepath.Join(src, "HEAD"), []byte("x\n"), 0o644)
				os.WriteFile(filepath.Join(src, "config"), []byte("old\n"), 0o644)
				sub := filepath.Join(e.workspace, "sub")
				os.Mkdir(sub, 0o755)
				os.WriteFile(filepath.Join(sub, ".git"), []byte("gitdir: elsewhere\n"), 0o644)
				switch pointer {
				case "symlink":
					os.Symlink(src, filepath.Join(shared, ".git"))
				case "file":
					os.WriteFile(filepath.Join(shared, ".git"), []byte("gitdir: "+src+"\n"), 0o644)
				case "core.worktree":
					os.Mkdir(filepath.Join(shared, ".git"), 0o755)
					os.WriteFile(filepath.Join(shared, ".git", "HEAD"), []byte("ref: refs/heads/x\n"), 0o644)
					os.WriteFile(filepath.Join(shared, ".git", "config"), []byte("[core]\n\tworktree = "+sub+"\n"), 0o644)
				}
				text := e.call(sessionCall("echo mine > src/config && echo changed > sub/.git && echo ran", "B", e.workspace, "")).text()
				if text != "ran\n" {
					t.Errorf("the session's call: %q", text)
				}
				if b, _ := os.ReadFile(filepath.Join(src, "config")); string(b) != "mine\n" {
					t.Errorf("src/config after the call: %q", b)
				}
				if _, err := os.Lstat(filepath.Join(src, "hooks")); err == nil {
					t.Error("bashcall made src/hooks")
				}
				if b, _ := os.ReadFile(filepath.Join(sub, ".git")); string(b) != "changed\n" {
					t.Errorf("sub/.git after the call: %q", b)
				}
			})
		}
	}
}

// TestGuardRecordInsideRoot: a snapshot reads a protected path through its
// writable directory's os.Root: a directory on the way that became a
// symlink out of it (a command can swap one in between the scan and the
// snapshot) has nothing read, or made, outside it.
func TestGuardRecordInsideRoot(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "config"), []byte("SECRET\n"), 0o600)
	if err := os.Symlink(outside, filepath.Join(root, "x")); err != nil {
		t.Fatal(err)
	}
	g := &gitGuard{}
	b := &guardBudget{bytes: maxGuardBytes}
	g.record(root, filepath.Join(root, "x", "config"), true, true, b)
	g.record(root, filepath.Join(root, "x", "hooks"), false, true, b)
	for _, e := range g.Entries {
		if strings.Contains(string(e.Data), "SECRET") {
			t.Errorf("the snapshot read outside its directory: %+v", e)
		}
	}
	if _, err := os.Lstat(filepath.Join(outside, "hooks")); err == nil {
		t.Error("a hooks/ was made outside the writable directory")
	}
}

// TestGuardUnreadableShared: a git file in a directory every session
// writes that a command made unreadable does not refuse other calls
// (bashcall as an unprivileged user, with snapshots, where it must read
// what it protects).
func TestGuardUnreadableShared(t *testing.T) {
	requireABI(t, 1)
	shared, err := os.MkdirTemp(testBase, "shared-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shared)
	e := newConfinedEnv(t, "[sandbox]\nwritable_roots = ["+jsonString(shared)+"]\n").asNobody()
	e.extraEnv = []string{"BASHCALL_PROTECT=snapshot"}
	os.Chown(shared, nobodyID, nobodyID)
	if text := e.call(bashReq("cd "+shared+" && touch .git && chmod 000 .git && echo planted", "")).text(); text != "planted\n" {
		t.Fatalf("planting: %q", text)
	}
	if text := e.call(bashReq("echo ran", "")).text(); text != "ran\n" {
		t.Errorf("the next call: %q", text)
	}
}

// sharedRootEnv is a confined test env with one more writable root, a
// directory every session's commands write (as /tmp), removed at the end.
func sharedRootEnv(t *testing.T, env []string) (*testEnv, string) {
	t.Helper()
	shared, err := os.MkdirTemp(testBase, "shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	e := newConfinedEnv(t, "[sandbox]\nwritable_roots = ["+jsonString(shared)+"]\n")
	e.extraEnv = env
	return e, shared
}

// sharedWorktreeEnv is sharedRootEnv with a repository main in the
// shared directory and its linked worktree wsA outside it (a session's
// workspace, as git -C /tmp/main worktree add ~/ws makes it).
func sharedWorktreeEnv(t *testing.T, env []string) (e *testEnv, main, wsA string) {
	t.Helper()
	e, shared := sharedRootEnv(t, env)
	main = filepath.Join(shared, "main")
	newRepo(t, main)
	wsA = filepath.Join(e.dir, "wsA")
	gitRun(t, main, "worktree", "add", "-q", wsA, "-b", "a")
	return e, main, wsA
}

// TestGuardWorktreeOutside: a repository in a directory every session
// writes whose linked worktree is a session's workspace outside every
// writable directory (git -C /tmp/main worktree add ~/ws) is protected in
// the other sessions' calls too, though their scans reach it only from
// that workspace's .git file.
func TestGuardWorktreeOutside(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, main, wsA := sharedWorktreeEnv(t, m.env)
			if text := e.call(sessionCall("echo pinned", "A", wsA, "")).text(); text != "pinned\n" {
				t.Fatalf("session A's call: %q", text)
			}
			hook := filepath.Join(main, ".git", "hooks", "pre-commit")
			e.call(sessionCall("echo planted > "+hook+"; git -C "+main+" config core.fsmonitor 'touch /nowhere'; true", "C", e.workspace, ""))
			checkUnplanted(t, hook, main)
		})
	}
}

// checkUnplanted fails the test if the hook a command tried to plant is
// there, or repository repo's config holds the core.fsmonitor it tried to
// set.
func checkUnplanted(t *testing.T, hook, repo string) {
	t.Helper()
	if b, err := os.ReadFile(hook); err == nil {
		t.Errorf("a hook was planted at %s: %q", hook, b)
	}
	if out, _ := exec.Command("git", "-C", repo, "config", "core.fsmonitor").Output(); len(out) > 0 {
		t.Errorf("the config of %s holds core.fsmonitor = %q", repo, out)
	}
}
