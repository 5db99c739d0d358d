package main

// Planted code (PROTOCOL.md section 7): a confined command tries to make
// git run its code later, outside the sandbox; the test then runs git
// unconfined, as the person would, and checks that nothing planted ran.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitRun runs git unconfined in dir, as the person or the host would.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "protocol.file.allow=always"}, args...)...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Logf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return string(out)
}

// plantVectors are the ways a command could make git run code later,
// each touching $PWNED/<name> when it runs; $G is the git dir.
var plantVectors = []struct{ name, script string }{
	{"hook", `printf '#!/bin/sh\ntouch %s/hook\n' "$PWNED" > "$G/hooks/pre-commit" && chmod +x "$G/hooks/pre-commit"`},
	{"post-checkout", `printf '#!/bin/sh\ntouch %s/post-checkout\n' "$PWNED" > "$G/hooks/post-checkout" && chmod +x "$G/hooks/post-checkout"`},
	{"fsmonitor", `git config core.fsmonitor "touch $PWNED/fsmonitor"`},
	{"hookspath", `mkdir -p /tmp/bashcall-evil-hooks && printf '#!/bin/sh\ntouch %s/hookspath\n' "$PWNED" > /tmp/bashcall-evil-hooks/pre-commit && chmod +x /tmp/bashcall-evil-hooks/pre-commit && git config core.hooksPath /tmp/bashcall-evil-hooks`},
	{"filter", `git config filter.evil.clean "touch $PWNED/filter; cat" && git config filter.evil.smudge "touch $PWNED/filter; cat" && echo '* filter=evil' > .gitattributes`},
	{"textconv", `git config diff.evil.textconv "touch $PWNED/textconv; cat" && echo '* diff=evil' > .gitattributes`},
	{"alias", `git config alias.st "!touch $PWNED/alias"`},
	{"worktree-config", `git config extensions.worktreeConfig true; printf '[core]\n\tfsmonitor = touch %s/worktree-config\n' "$PWNED" >> "$G/config.worktree"`},
	{"commondir", `rm -rf /tmp/bashcall-evil-common && cp -r "$G" /tmp/bashcall-evil-common && git --git-dir=/tmp/bashcall-evil-common config core.fsmonitor "touch $PWNED/commondir" && echo /tmp/bashcall-evil-common > "$G/commondir"`},
	{"replaced-config", `cp "$G/config" "$G/c2" && printf '[core]\n\tfsmonitor = touch %s/replaced-config\n' "$PWNED" >> "$G/c2" && mv -f "$G/c2" "$G/config"`},
	{"moved-config", `cp "$G/config" "$G/c2" && printf '[core]\n\tfsmonitor = touch %s/moved-config\n' "$PWNED" >> "$G/c2" && mv "$G/config" "$G/config.old" && mv "$G/c2" "$G/config"`},
	{"replaced-hooks", `mv "$G/hooks" "$G/hooks.old" && mkdir "$G/hooks" && printf '#!/bin/sh\ntouch %s/replaced-hooks\n' "$PWNED" > "$G/hooks/pre-commit" && chmod +x "$G/hooks/pre-commit"`},
	{"replaced-gitdir", `cp -r "$G" "$G.new" && printf '#!/bin/sh\ntouch %s/replaced-gitdir\n' "$PWNED" > "$G.new/hooks/pre-commit" && chmod +x "$G.new/hooks/pre-commit" && mv "$G" "$G.old" && mv "$G.new" "$G"`},
	{"remote", `git remote add evil "$G" && git config remote.evil.uploadpack "touch $PWNED/remote; git-upload-pack"`},
	// The name an earlier restore wrote its new file under, held by a
	// directory the restore could not remove.
	{"restore-name-held", `mkdir -p "$G/config.bashcall-restore/x" && git config core.fsmonitor "touch $PWNED/restore-name-held"`},
	// Last: where it is undone by snapshot, the repository is left broken.
	{"gitdir-to-file", `rm -rf /tmp/bashcall-evil-common && cp -r "$G" /tmp/bashcall-evil-common && git --git-dir=/tmp/bashcall-evil-common config core.fsmonitor "touch $PWNED/gitdir-to-file" && mv "$G" "$G.moved" && echo "gitdir: /tmp/bashcall-evil-common" > "$G"`},
}

// checkNothingRan runs git the way a person would after the call and
// fails if anything planted ran.
func checkNothingRan(t *testing.T, repo, pwned string) {
	t.Helper()
	os.WriteFile(filepath.Join(repo, "after.txt"), []byte("after\n"), 0o644)
	gitRun(t, repo, "status")
	gitRun(t, repo, "add", "-A")
	gitRun(t, repo, "commit", "-qm", "after the call")
	gitRun(t, repo, "diff", "HEAD~1")
	gitRun(t, repo, "st")
	gitRun(t, repo, "checkout", "-q", "-B", "later")
	gitRun(t, repo, "fetch", "-q", "evil")
	if planted, _ := os.ReadDir(pwned); len(planted) > 0 {
		var names []string
		for _, p := range planted {
			names = append(names, p.Name())
			os.Remove(filepath.Join(pwned, p.Name()))
		}
		t.Errorf("planted code ran outside the sandbox: %v", names)
	}
	if cfg := gitRun(t, repo, "config", "--list", "--local"); strings.Contains(cfg, "evil") || strings.Contains(cfg, "fsmonitor") || strings.Contains(cfg, "hookspath") {
		t.Errorf("the repository's config still holds planted keys:\n%s", cfg)
	}
}

// newRepo makes a repository with one commit in dir.
func newRepo(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	os.MkdirAll(dir, 0o755)
	gitRun(t, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-qm", "first")
}

// TestPlantedCode: each way of planting code (a hook, a dangerous config
// key, a commondir redirect, a replaced config, hooks dir or git dir),
// from a confined call of each mechanism and from a background task,
// runs nothing later when git runs unconfined.
func TestPlantedCode(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		for _, bg := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/background=%v", m.name, bg), func(t *testing.T) {
				e, pwned := plantEnv(t, m.env)
				newRepo(t, e.workspace)
				defer os.RemoveAll("/tmp/bashcall-evil-hooks")
				defer os.RemoveAll("/tmp/bashcall-evil-common")
				for i, v := range plantVectors {
					script := fmt.Sprintf("G=%q PWNED=%q\n%s", filepath.Join(e.workspace, ".git"), pwned, v.script)
					text, facts := plantCall(t, e, script, bg, i+1)
					t.Logf("%s: %s", v.name, text)
					if facts != nil && facts.RestoreFailed != "" {
						t.Errorf("%s: restore failed: %s", v.name, facts.RestoreFailed)
					}
					if strings.Contains(text, "reverted changes") && !strings.Contains(text, markerEscalate) {
						t.Errorf("%s: the revert marker is not followed by the escalation marker:\n%s", v.name, text)
					}
					checkNothingRan(t, e.workspace, pwned)
					os.Remove(filepath.Join(e.workspace, ".gitattributes"))
				}
			})
		}
	}
}

// plantCall runs script confined, in the foreground or as background
// task bash-<n>, and returns its text and sandbox facts once settled.
func plantCall(t *testing.T, e *testEnv, script string, bg bool, n int) (string, *sandboxFacts) {
	t.Helper()
	if !bg {
		r := e.call(sessionCall(script, "S", e.workspace, ""))
		var got foregroundResult
		decodeStructured(t, r, &got)
		return r.text(), got.Sandbox
	}
	id := fmt.Sprintf("bash-%d", n)
	if start := e.call(sessionCall(script, "S", e.workspace, `"run_in_background":true`)); start.text() != textStarted(id) {
		t.Fatalf("start: %q", start.text())
	}
	r := e.call(sessionReq("bash_output", `{"task_id":"`+id+`","wait":true}`, "S"))
	var got taskOutputResult
	decodeStructured(t, r, &got)
	return r.text(), got.Sandbox
}

// TestPlantedCodeFullDisk: a command that plants code and then fills the
// disk its repository is on, so that no restored file could be written,
// in the foreground and as a task: git run later runs nothing of it (the
// restore removes what the command left, which frees its blocks).
func TestPlantedCodeFullDisk(t *testing.T) {
	requireABI(t, 1)
	if !inNamespace(t, "--mount") {
		return
	}
	for _, m := range mechanisms {
		for _, bg := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/background=%v", m.name, bg), func(t *testing.T) {
				e, pwned := plantEnv(t, m.env)
				mountTmpfs(t, e.workspace, 1<<20)
				newRepo(t, e.workspace)
				script := fmt.Sprintf(`git config core.fsmonitor "touch %s/full-disk"; git config alias.st "!touch %s/full-disk-alias"; dd if=/dev/zero of=fill bs=64k 2>/dev/null; true`, pwned, pwned)
				text, facts := plantCall(t, e, script, bg, 1)
				t.Logf("%s", text)
				if m.name == "snapshot" && (facts == nil || len(facts.Reverted) == 0) {
					t.Errorf("nothing reported reverted: %+v", facts)
				}
				os.Remove(filepath.Join(e.workspace, "fill"))
				checkNothingRan(t, e.workspace, pwned)
			})
		}
	}
}

// TestPlantedCodeSubmodule: a submodule's hooks and config are protected
// like the superproject's.
func TestPlantedCodeSubmodule(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			upstream := filepath.Join(e.dir, "upstream")
			newRepo(t, upstream)
			newRepo(t, e.workspace)
			gitRun(t, e.workspace, "submodule", "add", "-q", upstream, "sub")
			gitRun(t, e.workspace, "commit", "-qm", "add sub")
			modDir := filepath.Join(e.workspace, ".git", "modules", "sub")
			if _, err := os.Stat(filepath.Join(modDir, "config")); err != nil {
				t.Fatalf("no submodule git dir: %v", err)
			}
			script := fmt.Sprintf(`printf '#!/bin/sh\ntouch %s/sub-hook\n' > %q/hooks/pre-commit; chmod +x %q/hooks/pre-commit
(cd sub && git config core.fsmonitor 'touch %s/sub-fsmonitor')
rm -rf /tmp/bashcall-evil-sub && cp -r %q /tmp/bashcall-evil-sub && git config --file /tmp/bashcall-evil-sub/config core.fsmonitor 'touch %s/sub-gitfile; false' && git config --file /tmp/bashcall-evil-sub/config core.worktree %q && echo 'gitdir: /tmp/bashcall-evil-sub' > sub/.git
true`, pwned, modDir, modDir, pwned, modDir, pwned, filepath.Join(e.workspace, "sub"))
			defer os.RemoveAll("/tmp/bashcall-evil-sub")
			r := e.call(sessionCall(script, "S", e.workspace, ""))
			t.Logf("call: %s", r.text())
			sub := filepath.Join(e.workspace, "sub")
			gitRun(t, e.workspace, "status")
			os.WriteFile(filepath.Join(sub, "b.txt"), []byte("b\n"), 0o644)
			gitRun(t, sub, "add", "-A")
			gitRun(t, sub, "commit", "-qm", "in the submodule")
			gitRun(t, sub, "status")
			if planted, _ := os.ReadDir(pwned); len(planted) > 0 {
				t.Errorf("planted code ran in the submodule: %v", planted)
			}
		})
	}
}

// TestGitWorkConfined: ordinary git work keeps working in a confined
// call under both mechanisms: add, commit, branch, checkout, stash, merge.
func TestGitWorkConfined(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e := newConfinedEnv(t, "")
			e.extraEnv = m.env
			newRepo(t, e.workspace)
			script := `set -e
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com
echo b > b.txt && git add b.txt && git commit -qm second
git checkout -q -b feature && echo c > c.txt && git add c.txt && git commit -qm third
git checkout -q - && echo dirty >> a.txt && git stash -q && git stash pop -q && git checkout -q a.txt
git merge -q --no-edit feature && git log --oneline | wc -l
git tag v1 && echo done`
			r := e.call(sessionCall(script, "S", e.workspace, ""))
			if text := r.text(); !strings.HasSuffix(text, "3\ndone\n") {
				t.Errorf("git work failed:\n%s", text)
			}
			// And a config change is refused or reverted, never kept.
			r = e.call(sessionCall("git config user.name planted; git remote add origin /elsewhere", "S", e.workspace, ""))
			text := r.text()
			denied := strings.Contains(text, markerDenied(modeWorkspaceWrite))
			reverted := strings.Contains(text, markerReverted([]string{filepath.Join(e.workspace, ".git", "config")}))
			if !denied && !reverted || !strings.Contains(text, markerEscalate) {
				t.Errorf("git config: neither denied nor reverted, or no escalation offered:\n%s", text)
			}
			if cfg := gitRun(t, e.workspace, "config", "--list", "--local"); strings.Contains(cfg, "planted") || strings.Contains(cfg, "elsewhere") {
				t.Errorf("a config change was kept:\n%s\ncall: %s", cfg, r.text())
			}
		})
	}
}

// TestGitGuardRestore: the snapshot restore in process: contents, modes,
// added and removed entries, a symlink swapped in for a directory, and a
// path that did not exist.
func TestGitGuardRestore(t *testing.T) {
	ws := t.TempDir()
	g := filepath.Join(ws, ".git")
	os.MkdirAll(filepath.Join(g, "hooks"), 0o755)
	os.WriteFile(filepath.Join(g, "config"), []byte("[core]\n"), 0o644)
	os.WriteFile(filepath.Join(g, "hooks", "pre-commit.sample"), []byte("#!/bin/sh\n"), 0o755)
	guard, err := planGitGuard([]string{ws}, nil, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if reverted, err := guard.restore(); len(reverted) != 0 || err != nil {
		t.Fatalf("an untouched repository: reverted %v, %v", reverted, err)
	}
	os.WriteFile(filepath.Join(g, "config"), []byte("[core]\n\tfsmonitor = evil\n"), 0o644)
	os.Chmod(filepath.Join(g, "hooks", "pre-commit.sample"), 0o777)
	os.WriteFile(filepath.Join(g, "hooks", "pre-commit"), []byte("evil"), 0o755)
	os.WriteFile(filepath.Join(g, "commondir"), []byte("/tmp\n"), 0o644)
	reverted, err := guard.restore()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(g, "commondir"), filepath.Join(g, "config"), filepath.Join(g, "hooks"), filepath.Join(g, "hooks", "pre-commit.sample")}
	if strings.Join(reverted, ",") != strings.Join(want, ",") {
		t.Errorf("reverted = %v, want %v", reverted, want)
	}
	if b, _ := os.ReadFile(filepath.Join(g, "config")); string(b) != "[core]\n" {
		t.Errorf("config = %q", b)
	}
	if _, err := os.Lstat(filepath.Join(g, "hooks", "pre-commit")); err == nil {
		t.Error("the planted hook is still there")
	}
	if fi, _ := os.Stat(filepath.Join(g, "hooks", "pre-commit.sample")); fi.Mode().Perm() != 0o755 {
		t.Errorf("sample mode = %v", fi.Mode())
	}
	// The hooks dir replaced by a symlink to a directory outside: the
	// restore must not write through it.
	outside := t.TempDir()
	os.RemoveAll(filepath.Join(g, "hooks"))
	os.Symlink(outside, filepath.Join(g, "hooks"))
	if _, err := guard.restore(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the restore wrote through a symlink: %v", entries)
	}
	if fi, err := os.Lstat(filepath.Join(g, "hooks")); err != nil || !fi.IsDir() {
		t.Errorf("hooks = %v, %v; want a directory again", fi, err)
	}
	b, _ := json.Marshal(guard)
	if len(b) > 4096 {
		t.Errorf("a snapshot of a small repository is %d bytes", len(b))
	}
}

// TestPlantedCodeOtherSession: session B, whose workspace is elsewhere,
// plants code in the repository of session A's workspace under /tmp
// (writable to both); git run there later runs nothing of it.
func TestPlantedCodeOtherSession(t *testing.T) {
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			wsA, err := os.MkdirTemp("/tmp", "bashcall-ws-a-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(wsA)
			newRepo(t, wsA)
			e.call(sessionCall("true", "A", wsA, "")) // A's first call pins its workspace
			newRepo(t, e.workspace)
			plant := fmt.Sprintf(`printf '#!/bin/sh\ntouch %s/other-session\n' > %q/.git/hooks/pre-commit; chmod +x %q/.git/hooks/pre-commit; git -C %q config core.fsmonitor 'touch %s/other-fsmonitor'; true`,
				pwned, wsA, wsA, wsA, pwned)
			r := e.call(sessionCall(plant, "B", e.workspace, ""))
			t.Logf("B: %s", r.text())
			checkNothingRan(t, wsA, pwned)
		})
	}
}

// TestControlModesRestored: without a mount namespace a command can chmod
// what its user owns; the modes of bashcall's control paths and their
// parents are put back after the call, and reported.
func TestControlModesRestored(t *testing.T) {
	e := newConfinedEnv(t, "")
	e.extraEnv = []string{"BASHCALL_PROTECT=snapshot"}
	before, _ := os.Stat(e.dir) // the state dir's parent
	r := e.call(bashReq(fmt.Sprintf("chmod 000 %q", e.dir), ""))
	after, err := os.Stat(e.dir)
	if err != nil || after.Mode() != before.Mode() {
		t.Errorf("mode of the state dir's parent: %v, want %v; text %q", after.Mode(), before.Mode(), r.text())
	}
	if !strings.Contains(r.text(), markerReverted([]string{e.dir})) {
		t.Errorf("no revert marker for %s in %q", e.dir, r.text())
	}
}

// TestPlantedCodeWhileRunning: a background task plants a commondir (which
// no mount can protect before it exists) and keeps running; the planted
// file is gone within seconds, not when the task settles.
func TestPlantedCodeWhileRunning(t *testing.T) {
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, commondir := startPlanting(t, m.env, "echo /tmp/elsewhere > .git/commondir; echo planted; sleep 30")
			waitFor(t, 10*time.Second, "the task to plant", func() bool {
				return strings.Contains(e.call(sessionReq("bash_output", `{"task_id":"bash-1"}`, "S")).text(), "planted")
			})
			waitFor(t, 5*time.Second, "the planted commondir to be removed while the task runs", func() bool {
				_, err := os.Lstat(commondir)
				return err != nil
			})
			if r := e.call(sessionReq("bash_list", `{}`, "S")); !strings.Contains(r.text(), "bash-1 running") {
				t.Errorf("the task is no longer running: %q", r.text())
			}
		})
	}
}

// TestPlantedCodeReplanted: a background task that plants a commondir
// again, in a loop, after the sweep put it back, is stopped, and the file
// does not stay planted; the output says what was put back.
func TestPlantedCodeReplanted(t *testing.T) {
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, commondir := startPlanting(t, m.env, `while :; do [ -e .git/commondir ] || echo /tmp/elsewhere > .git/commondir; sleep 0.01; done`)
			r := e.call(sessionReq("bash_output", `{"task_id":"bash-1","wait":true,"timeout_ms":15000}`, "S"))
			if text := r.text(); !strings.Contains(text, "[status: killed") || !strings.Contains(text, "[sandbox: reverted changes to protected files: "+commondir) {
				t.Errorf("a task planting again and again: %q", text)
			}
			if _, err := os.Lstat(commondir); err == nil {
				t.Error("the commondir stayed planted")
			}
		})
	}
}

// startPlanting starts script as task bash-1 of session S in a fresh
// repository, killed when the test ends, and returns where its commondir
// would be planted.
func startPlanting(t *testing.T, env []string, script string) (*testEnv, string) {
	e := newConfinedEnv(t, "")
	e.extraEnv = env
	newRepo(t, e.workspace)
	start := e.call(sessionCall(script, "S", e.workspace, `"run_in_background":true`))
	if start.text() != textStarted("bash-1") {
		t.Fatalf("start: %q", start.text())
	}
	t.Cleanup(func() { e.call(sessionReq("bash_kill", `{"task_id":"bash-1"}`, "S")) })
	return e, filepath.Join(e.workspace, ".git", "commondir")
}

// TestPlantedCodeLinkedWorktree: a workspace that is a linked worktree
// (its .git a file pointing into the main repository's git dir, both in
// writable directories) keeps its .git file, its worktree git dir and the
// common config protected.
func TestPlantedCodeLinkedWorktree(t *testing.T) {
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			main := filepath.Join(e.workspace, "main")
			newRepo(t, main)
			gitRun(t, main, "worktree", "add", "-q", filepath.Join(e.workspace, "wt"), "-b", "wt")
			wt := filepath.Join(e.workspace, "wt")
			plant := fmt.Sprintf(`git config core.fsmonitor 'touch %[1]s/wt-common'
git config --worktree core.fsmonitor 'touch %[1]s/wt-worktree' 2>/dev/null
printf 'gitdir: /tmp/bashcall-evil-wt\n' > .git
true`, pwned)
			r := e.call(sessionCall(plant, "S", wt, ""))
			t.Logf("call: %s", r.text())
			if b, _ := os.ReadFile(filepath.Join(wt, ".git")); strings.Contains(string(b), "bashcall-evil-wt") {
				t.Errorf("the worktree's .git file was replaced: %q", b)
			}
			checkNothingRan(t, wt, pwned)
		})
	}
}

// plantEnv is a confined env under a protection mechanism (its
// environment), with a directory where planted code leaves its marks.
func plantEnv(t *testing.T, mechanismEnv []string) (*testEnv, string) {
	t.Helper()
	e := newConfinedEnv(t, "")
	e.extraEnv = mechanismEnv
	pwned := filepath.Join(e.dir, "pwned")
	if err := os.Mkdir(pwned, 0o777); err != nil {
		t.Fatal(err)
	}
	return e, pwned
}
