package main

// Repositories a call makes (gitnew.go): a command makes one where git
// goes later on its own, plants code in it, and git run unconfined after
// the call, as the person would, runs nothing of it.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitIdent names the author and committer of a confined call's commits.
const gitIdent = "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com"

// newRepoVectors make a repository git reaches from the workspace and
// plant code in it ($PWNED/<name> when it runs); with: the workspace is a
// repository with one commit first, and an upstream repository is at $UP.
var newRepoVectors = []struct {
	name, script string
	repo         bool
}{
	// git init where there was no repository.
	{"init", `git init -q && git add -A && git commit -qm one && git config core.fsmonitor "touch $PWNED/init-fsmonitor; false" &&
git config alias.st "!touch $PWNED/init-alias" && printf '#!/bin/sh\ntouch %s/init-hook\n' "$PWNED" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`, false},
	// A .git file pointing at a git dir made in /tmp.
	{"separate", `git init -q --separate-git-dir="$SEP" && git add -A && git commit -qm one && git config core.fsmonitor "touch $PWNED/separate; false"`, false},
	// The same, the .git file's path ending in a space (git strips only
	// newlines), or padded with newlines past 4 KiB.
	{"separate-space", `git init -q --separate-git-dir="$SEP " && git add -A && git commit -qm one && git config core.fsmonitor "touch $PWNED/separate-space; false" &&
printf 'gitdir: %s \n' "$SEP" > .git && git status >/dev/null`, false},
	{"separate-padded", `git init -q --separate-git-dir="$SEP" && git config core.fsmonitor "touch $PWNED/separate-padded; false" &&
{ printf 'gitdir: %s' "$SEP"; head -c 5000 /dev/zero | tr '\0' '\n'; } > .git && git status >/dev/null`, false},
	// The workspace made a bare repository, .git's HEAD removed.
	{"bare-top", `rm .git/HEAD && echo "ref: refs/heads/master" > HEAD && mkdir objects refs &&
printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = "touch %s/bare-top; false"\n' "$PWNED" > config`, true},
	// The same as a linked worktree's git dir, its objects and refs in
	// /tmp through a commondir, its config a config.worktree.
	{"bare-top-commondir", `cp -r .git "$SEP" && rm .git/HEAD && echo "ref: refs/heads/master" > HEAD && echo "$SEP" > commondir &&
git --git-dir="$SEP" config extensions.worktreeConfig true && printf '[core]\n\tbare = false\n\tworktree = %s\n\tfsmonitor = "touch %s/bare-top-commondir; false"\n' "$PWD" "$PWNED" > config.worktree`, true},
	// A repository made under the checkout, and a gitlink to it in the index.
	{"gitlink", `mkdir nested && cd nested && git init -q && git commit -q --allow-empty -m n && git config core.fsmonitor "touch $PWNED/gitlink; false" &&
cd .. && git update-index --add --cacheinfo "160000,$(git -C nested rev-parse HEAD),nested"`, true},
	// The same through a .git file, the git dir in /tmp.
	{"gitlink-file", `mkdir nested && git init -q --separate-git-dir="$SEP" nested && git -C nested commit -q --allow-empty -m n &&
git -C nested config core.fsmonitor "touch $PWNED/gitlink-file; false" && git update-index --add --cacheinfo "160000,$(git -C nested rev-parse HEAD),nested"`, true},
	// The same in a split index, the gitlink replacing a file's entry of
	// the shared index: its name is only there.
	{"gitlink-split", `echo x > nested && git add nested && git commit -qm f && git update-index --split-index && rm nested && mkdir nested && cd nested &&
git init -q && git commit -q --allow-empty -m n && git config core.fsmonitor "touch $PWNED/gitlink-split; false" &&
cd .. && git update-index --cacheinfo "160000,$(git -C nested rev-parse HEAD),nested"`, true},
	// A submodule added, with a planted config and hook in its git dir.
	{"submodule", `git -c protocol.file.allow=always submodule add -q "$UP" added && git commit -qm sub &&
git -C added config core.fsmonitor "touch $PWNED/submodule; false" && printf '#!/bin/sh\ntouch %s/submodule-hook\n' "$PWNED" > .git/modules/added/hooks/post-checkout && chmod +x .git/modules/added/hooks/post-checkout`, true},
	// A submodule's git dir deeper than names used to be looked at.
	{"deep-module", `G=.git/modules/a/b/c/d/e/f/g/h && mkdir -p "$(dirname "$G")" && git clone -q --bare "$UP" "$G" &&
printf '#!/bin/sh\ntouch %s/deep-module\n' "$PWNED" > "$G/hooks/post-checkout" && chmod +x "$G/hooks/post-checkout" && git config -f "$G/config" core.bare false &&
printf '[submodule "a/b/c/d/e/f/g/h"]\n\tpath = deep\n\turl = %s\n' "$UP" >> .gitmodules && git add .gitmodules &&
git update-index --add --cacheinfo "160000,$(git -C "$G" rev-parse HEAD),deep" && git commit -qm deep`, true},
	// One among more entries of .git/modules than are listed.
	{"wide-modules", `for i in $(seq 2001); do mkdir .git/modules/pad$i; done && G=.git/modules/wide && git clone -q --bare "$UP" "$G" &&
printf '#!/bin/sh\ntouch %s/wide-modules\n' "$PWNED" > "$G/hooks/post-checkout" && chmod +x "$G/hooks/post-checkout" && git config -f "$G/config" core.bare false &&
printf '[submodule "wide"]\n\tpath = wide\n\turl = %s\n' "$UP" >> .gitmodules && git add .gitmodules &&
git update-index --add --cacheinfo "160000,$(git -C "$G" rev-parse HEAD),wide" && git commit -qm wide`, true},
	// A gitlink inside a submodule's own index.
	{"gitlink-in-submodule", `mkdir sub/deeper && cd sub/deeper && git init -q && git commit -q --allow-empty -m d && git config core.fsmonitor "touch $PWNED/gitlink-in-submodule; false" &&
cd .. && git update-index --add --cacheinfo "160000,$(git -C deeper rev-parse HEAD),deeper"`, true},
}

// TestGuardNewRepository: each repository a command makes where git goes
// later (newRepoVectors), in the foreground and as a task, under either
// mechanism, as root and as an unprivileged user, runs nothing of what
// was planted in it when git runs later, recursing into submodules; and
// a repository made by git init keeps its commits.
func TestGuardNewRepository(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		for _, nobody := range []bool{false, true} {
			for _, bg := range []bool{false, true} {
				for i, v := range newRepoVectors {
					t.Run(fmt.Sprintf("%s/nobody=%v/background=%v/%s", m.name, nobody, bg, v.name), func(t *testing.T) {
						e, pwned := plantEnv(t, m.env)
						os.Chmod(pwned, 0o777)
						up := filepath.Join(e.dir, "upstream")
						if v.repo {
							withSubmodule(t, e) // its upstream too
						} else {
							newRepo(t, up)
							os.WriteFile(filepath.Join(e.workspace, "a.txt"), []byte("a\n"), 0o644)
						}
						sep := filepath.Join("/tmp", fmt.Sprintf("bashcall-sep-%s-%d", filepath.Base(e.dir), i))
						t.Cleanup(func() { os.RemoveAll(sep); os.RemoveAll(sep + " ") })
						if nobody {
							e.asNobody()
						}
						script := fmt.Sprintf("%s\nexport GIT_CONFIG_NOSYSTEM=1 PWNED=%q UP=%q SEP=%q\n%s && echo planted", gitIdent, pwned, up, sep, v.script)
						text, facts := plantCall(t, e, script, bg, 1)
						// A task's sweeps may undo what it does before it is
						// done planting (one that plants for seconds).
						if !strings.Contains(text, "planted") && !(bg && strings.Contains(text, "reverted changes")) {
							t.Fatalf("the command did not plant: %q", text)
						}
						if facts == nil || len(facts.Reverted) == 0 || !strings.Contains(text, "reverted changes") {
							t.Errorf("nothing reported reverted: %q", text)
						}
						if facts != nil && facts.RestoreFailed != "" {
							t.Errorf("restore failed: %s", facts.RestoreFailed)
						}
						checkNothingRanAs(t, e.workspace, pwned)
						for _, args := range [][]string{{"submodule", "update", "--init", "--recursive"}, {"submodule", "foreach", "--recursive", "git status"}, {"st"}} {
							gitRun(t, e.workspace, append([]string{"-c", "safe.directory=*"}, args...)...)
						}
						if planted, _ := os.ReadDir(pwned); len(planted) > 0 {
							t.Errorf("planted code ran: %v", planted)
						}
						if v.name == "init" {
							if log := gitRun(t, e.workspace, "-c", "safe.directory=*", "log", "--oneline"); !strings.Contains(log, " one") {
								t.Errorf("the repository git init made lost its commit: %q", log)
							}
						}
					})
				}
			}
		}
	}
}

// TestGuardNewRepositoryOrdinary: a repository a confined git init makes
// keeps working, confined in the next call and unconfined after; a
// submodule a confined git submodule add makes keeps its checkout and
// commits; a workspace that was a bare repository keeps its HEAD.
func TestGuardNewRepositoryOrdinary(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name+"/init", func(t *testing.T) {
			e, _ := plantEnv(t, m.env)
			os.WriteFile(filepath.Join(e.workspace, "a.txt"), []byte("a\n"), 0o644)
			first := e.call(sessionCall(gitIdent+"\ngit init -q && git add -A && git commit -qm one && echo made", "S", e.workspace, "")).text()
			if !strings.HasPrefix(first, "made\n") || !strings.Contains(first, "/.git/config") {
				t.Errorf("the first call: %q", first)
			}
			os.WriteFile(filepath.Join(e.workspace, "b.txt"), []byte("b\n"), 0o644)
			second := e.call(sessionCall(gitIdent+"\ngit add -A && git commit -qm two && git log --oneline | wc -l", "S", e.workspace, "")).text()
			if second != "2\n" {
				t.Errorf("the second call: %q", second)
			}
			if log := gitRun(t, e.workspace, "log", "--oneline"); strings.Count(log, "\n") != 2 {
				t.Errorf("git log after: %q", log)
			}
		})
		t.Run(m.name+"/submodule", func(t *testing.T) {
			e, _ := plantEnv(t, m.env)
			up := filepath.Join(e.dir, "upstream")
			newRepo(t, up)
			newRepo(t, e.workspace)
			add := fmt.Sprintf(gitIdent+"\ngit -c protocol.file.allow=always submodule add -q %q added && git commit -qm sub && echo added", up)
			if text := e.call(sessionCall(add, "S", e.workspace, "")).text(); !strings.HasPrefix(text, "added\n") {
				t.Errorf("the call: %q", text)
			}
			if _, err := os.Stat(filepath.Join(e.workspace, "added", "a.txt")); err != nil {
				t.Errorf("the submodule's checkout: %v", err)
			}
			if st := gitRun(t, e.workspace, "status", "--porcelain"); st != "" {
				t.Errorf("git status after: %q", st)
			}
		})
		t.Run(m.name+"/embedded", func(t *testing.T) {
			// git add of a repository made in the call: it stays a
			// repository of its own (git run in it must not fall through
			// to the outer one), without its config and hooks.
			e, _ := plantEnv(t, m.env)
			newRepo(t, e.workspace)
			add := gitIdent + "\nmkdir emb && cd emb && git init -q && git commit -q --allow-empty -m inner && cd .. && git add emb 2>/dev/null && echo added"
			if text := e.call(sessionCall(add, "S", e.workspace, "")).text(); !strings.HasPrefix(text, "added\n") {
				t.Errorf("the call: %q", text)
			}
			if log := gitRun(t, filepath.Join(e.workspace, "emb"), "log", "--oneline"); !strings.Contains(log, "inner") || strings.Contains(log, "first") {
				t.Errorf("git log in the embedded repository: %q", log)
			}
		})
		t.Run(m.name+"/bare", func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			src := filepath.Join(e.dir, "src")
			newRepo(t, src)
			gitRun(t, e.dir, "clone", "-q", "--bare", src, e.workspace)
			plant := fmt.Sprintf(`printf '#!/bin/sh\ntouch %s/bare-hook\n' > hooks/post-update; chmod +x hooks/post-update; git config core.pager "touch %s/bare-pager"; echo done`, pwned, pwned)
			if text := e.call(sessionCall(plant, "S", e.workspace, "")).text(); !strings.HasPrefix(text, "done\n") {
				t.Errorf("the call: %q", text)
			}
			if _, err := os.Lstat(filepath.Join(e.workspace, "HEAD")); err != nil {
				t.Errorf("the bare repository's HEAD: %v", err)
			}
			if cfg := gitRun(t, e.workspace, "config", "--list", "--local"); strings.Contains(cfg, "pager") {
				t.Errorf("the bare repository's config kept what was planted: %q", cfg)
			}
			if b, err := os.ReadFile(filepath.Join(e.workspace, "hooks", "post-update")); err == nil {
				t.Errorf("the bare repository's hook kept what was planted: %q", b)
			}
		})
	}
}

// TestGuardManyGitlinks: a command that adds more gitlinks than a call
// protects, the one to its planted repository last, or leaves an index
// bashcall cannot read to its end, has the index moved aside: git run
// later enters none, and the next call is not refused. An index of more
// gitlinks than a call protects, made otherwise, refuses the workspace's
// calls, as a .gitmodules of more submodules does.
func TestGuardManyGitlinks(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name+"/added", func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			newRepo(t, e.workspace)
			plant := fmt.Sprintf(gitIdent+`
mkdir zzz && cd zzz && git init -q && git commit -q --allow-empty -m n && git config core.fsmonitor "touch %s/many; false" && cd ..
h=$(git -C zzz rev-parse HEAD)
for i in $(seq 1 %d); do printf '160000 %%s\tl%%05d\n' "$h" "$i"; done | git update-index --index-info
git update-index --add --cacheinfo "160000,$h,zzz" && echo planted`, pwned, maxSubmodules)
			text := e.call(bashReq(plant, `"timeoutMs":60000`)).text()
			if !strings.HasPrefix(text, "planted\n") || !strings.Contains(text, "/.git/index") {
				t.Errorf("the call: %q", text)
			}
			checkNothingRanAs(t, e.workspace, pwned)
			if text := e.call(bashReq("echo next", "")).text(); text != "next\n" {
				t.Errorf("the next call: %q", text)
			}
		})
		t.Run(m.name+"/unreadable", func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			newRepo(t, e.workspace)
			plant := fmt.Sprintf(`mkdir nested && cd nested && git init -q && git config core.fsmonitor "touch %s/cut; false" && cd .. &&
git update-index --add --cacheinfo "160000,$(git rev-parse HEAD),nested" && truncate -s 120 .git/index && echo planted`, pwned)
			if text := e.call(bashReq(plant, "")).text(); !strings.HasPrefix(text, "planted\n") || !strings.Contains(text, "/.git/index") {
				t.Errorf("the call: %q", text)
			}
			checkNothingRanAs(t, e.workspace, pwned)
		})
		t.Run(m.name+"/refused", func(t *testing.T) {
			e, _ := plantEnv(t, m.env)
			newRepo(t, e.workspace)
			head := strings.TrimSpace(gitRun(t, e.workspace, "rev-parse", "HEAD"))
			var info strings.Builder
			for i := 0; i <= maxSubmodules; i++ {
				fmt.Fprintf(&info, "160000 %s\tl%05d\n", head, i)
			}
			c := exec.Command("git", "update-index", "--index-info")
			c.Dir, c.Stdin = e.workspace, strings.NewReader(info.String())
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("git update-index: %v %s", err, out)
			}
			if text := e.call(bashReq("echo ran", "")).text(); !strings.Contains(text, "too many protected git files under ") {
				t.Errorf("a call in a workspace of %d gitlinks: %q", maxSubmodules+1, text)
			}
		})
	}
}

// TestGuardNewRepositoryWorktree: a workspace that is a linked worktree
// of a repository in another writable directory has its index there: a
// gitlink the command adds to it, to a repository it makes in the
// workspace, runs nothing later either.
func TestGuardNewRepositoryWorktree(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, _, wsA := sharedWorktreeEnv(t, m.env)
			pwned := filepath.Join(e.dir, "pwned")
			os.Mkdir(pwned, 0o777)
			plant := fmt.Sprintf(gitIdent+`
mkdir nested && cd nested && git init -q && git commit -q --allow-empty -m n && git config core.fsmonitor "touch %s/worktree; false" &&
cd .. && git update-index --add --cacheinfo "160000,$(git -C nested rev-parse HEAD),nested" && echo planted`, pwned)
			if text := e.call(sessionCall(plant, "A", wsA, "")).text(); !strings.HasPrefix(text, "planted\n") || !strings.Contains(text, "/nested/.git") {
				t.Errorf("the call: %q", text)
			}
			checkNothingRanAs(t, wsA, pwned)
		})
	}
}

// TestGuardEnclosingRepository: a workspace in a directory every session
// writes (a writable root here, /tmp alike), below a directory of it that
// is, or becomes, a repository: git run in the workspace goes up to that
// one. Code planted in an existing one's config, or in one a command makes
// there, runs nothing later.
func TestGuardEnclosingRepository(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		for _, existing := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/existing=%v", m.name, existing), func(t *testing.T) {
				e, shared := sharedRootEnv(t, m.env)
				pwned := filepath.Join(e.dir, "pwned")
				os.Mkdir(pwned, 0o777)
				outer := filepath.Join(shared, "outer")
				ws := filepath.Join(outer, "ws")
				os.MkdirAll(ws, 0o755)
				make := "git init -q " + outer + " && "
				if existing {
					newRepo(t, outer)
					os.MkdirAll(ws, 0o755)
					make = ""
				}
				plant := fmt.Sprintf(`%sgit -C %s config core.fsmonitor "touch %s/outer; false" ; git -C %s config alias.st "!touch %s/outer-alias"; echo planted`, make, outer, pwned, outer, pwned)
				if text := e.call(sessionCall(plant, "A", ws, "")).text(); !strings.HasPrefix(text, "planted\n") {
					t.Errorf("the call: %q", text)
				}
				checkNothingRanAs(t, ws, pwned)
				gitRun(t, ws, "-c", "safe.directory=*", "st")
				if planted, _ := os.ReadDir(pwned); len(planted) > 0 {
					t.Errorf("planted code ran: %v", planted)
				}
			})
		}
	}
}

// TestGuardNewRepositoryUndone: a task that undoes what a sweep did to a
// repository it made (renames the moved-aside config back, or writes a new
// config into its new repository sweep after sweep) is stopped, as one
// that plants a protected path again is; a repository whose config is
// written again once (a git clone finishing) is not.
func TestGuardNewRepositoryUndone(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		for _, c := range []struct {
			name, script string
			killed       bool
		}{
			{"renamed-back", `mkdir sub && cd sub && git init -q && git commit -q --allow-empty -m s && git config core.fsmonitor "touch $PWNED/renamed; false" && cd .. &&
git update-index --add --cacheinfo "160000,$(git -C sub rev-parse HEAD),sub" && end=$((SECONDS+8)); while [ $SECONDS -lt $end ]; do for d in sub/.git/config.bashcall-moved-*; do [ -e "$d" ] && mv "$d" sub/.git/config; done; sleep 0.005; done`, true},
			{"config-rewritten", `git init -q && end=$((SECONDS+8)); while [ $SECONDS -lt $end ]; do [ -e .git/config ] || printf '[core]\n\tfsmonitor = "touch %s/rewritten; false"\n' "$PWNED" > .git/config; sleep 0.005; done`, true},
			{"config-written-twice", `git init -q && sleep 1.5 && git config core.bare false && sleep 1.5 && echo done`, false},
		} {
			t.Run(m.name+"/"+c.name, func(t *testing.T) {
				e, pwned := plantEnv(t, m.env)
				if c.name == "renamed-back" {
					newRepo(t, e.workspace)
				}
				script := gitIdent + "\n" + fmt.Sprintf("PWNED=%q\n", pwned) + c.script
				if start := e.call(sessionCall(script, "S", e.workspace, `"run_in_background":true`)); start.text() != textStarted("bash-1") {
					t.Fatalf("start: %q", start.text())
				}
				t.Cleanup(func() { e.call(sessionReq("bash_kill", `{"task_id":"bash-1"}`, "S")) })
				text := e.call(sessionReq("bash_output", `{"task_id":"bash-1","wait":true,"timeout_ms":20000}`, "S")).text()
				if killed := strings.Contains(text, "[status: killed"); killed != c.killed {
					t.Errorf("killed %v, want %v: %q", killed, c.killed, text)
				}
				checkNothingRanAs(t, e.workspace, pwned)
			})
		}
	}
}

// TestGuardWorkspaceChmodded: an unprivileged command that plants and
// then makes the workspace itself mode 000 (Landlock does not govern
// chmod, and a writable directory is the user's to chmod) does not keep
// what it planted: the restore and the look after the call give the
// workspace its owner's rwx back before opening it.
func TestGuardWorkspaceChmodded(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			os.Chmod(pwned, 0o777)
			newRepo(t, e.workspace)
			e.asNobody()
			plant := fmt.Sprintf(`%s
git config core.fsmonitor "touch %[2]s/config; false" 2>/dev/null
mkdir nested && cd nested && git init -q && git commit -q --allow-empty -m n && git config core.fsmonitor "touch %[2]s/nested; false" && cd .. &&
git update-index --add --cacheinfo "160000,$(git -C nested rev-parse HEAD),nested" && chmod 000 "$PWD" && echo planted`, gitIdent, pwned)
			text := e.call(bashReq(plant, "")).text()
			if !strings.HasPrefix(text, "planted\n") || strings.Contains(text, "could not restore") {
				t.Errorf("the call: %q", text)
			}
			if fi, err := os.Stat(e.workspace); err != nil || fi.Mode().Perm()&0o700 != 0o700 {
				t.Errorf("the workspace after the call: %v, %v", fi.Mode(), err)
			}
			checkNothingRanAs(t, e.workspace, pwned)
		})
	}
}
