package main

// The git protection against a command that reshapes the directories on
// the way to the protected files: a directory swapped for a symlink, the
// parent of a pinned git dir renamed away, a symlink on the way to a
// submodule's git dir replaced; and git's own removals of worktrees and
// submodules, which are not reported as failures.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withSubmodule makes a repository in the env's workspace with submodule
// sub, and returns sub's checkout and git dir.
func withSubmodule(t *testing.T, e *testEnv) (sub, modDir string) {
	t.Helper()
	upstream := filepath.Join(e.dir, "upstream")
	newRepo(t, upstream)
	newRepo(t, e.workspace)
	gitRun(t, e.workspace, "submodule", "add", "-q", upstream, "sub")
	gitRun(t, e.workspace, "commit", "-qm", "add sub")
	modDir = filepath.Join(e.workspace, ".git", "modules", "sub")
	if _, err := os.Stat(filepath.Join(modDir, "config")); err != nil {
		t.Fatalf("no submodule git dir: %v", err)
	}
	return filepath.Join(e.workspace, "sub"), modDir
}

// TestGuardSwappedForSymlink: a git dir under .git/modules that a command
// made (with a planted config and hook), protected from the next call on,
// and then swapped for a symlink to .git: the restore neither writes the
// recorded files through the link over .git's own config and hooks, nor
// removes .git's files as the module's added entries.
func TestGuardSwappedForSymlink(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		// planted: the module's config and hook exist when it is swapped;
		// absent: they do not, and are removed after the call if they
		// exist then (through the link: .git's own).
		for _, planted := range []bool{true, false} {
			t.Run(fmt.Sprint(m.name, "/planted=", planted), func(t *testing.T) {
				swappedForSymlink(t, m.env, planted)
			})
		}
	}
}

// swappedForSymlink is one case of TestGuardSwappedForSymlink.
func swappedForSymlink(t *testing.T, env []string, planted bool) {
	e, pwned := plantEnv(t, env)
	newRepo(t, e.workspace)
	gitRun(t, e.workspace, "remote", "add", "origin", "https://example.com/x.git")
	gitDir := filepath.Join(e.workspace, ".git")
	config, _ := os.ReadFile(filepath.Join(gitDir, "config"))
	hooks, _ := os.ReadDir(filepath.Join(gitDir, "hooks"))
	plant := fmt.Sprintf(`mkdir -p .git/modules/m/hooks && cp .git/HEAD .git/modules/m/HEAD && cp .git/config .git/modules/m/config
printf '[core]\n\tfsmonitor = "touch %[1]s/fsmonitor; false"\n' >> .git/modules/m/config
printf '#!/bin/sh\ntouch %[1]s/hook\n' > .git/modules/m/hooks/pre-commit && chmod +x .git/modules/m/hooks/pre-commit
echo planted`, pwned)
	if !planted {
		plant = "mkdir -p .git/modules/m && cp .git/HEAD .git/modules/m/HEAD && echo planted"
	}
	if text := e.call(bashReq(plant, "")).text(); !strings.HasPrefix(text, "planted\n") {
		t.Fatalf("planting: %q", text)
	}
	text := e.call(bashReq("mv .git/modules/m .git/modules/m.old || rm -rf .git/modules/m; ln -s .. .git/modules/m; echo swapped", "")).text()
	t.Logf("swap: %q", text)
	if strings.Contains(text, "could not restore") {
		t.Errorf("the restore failed: %q", text)
	}
	if b, err := os.ReadFile(filepath.Join(gitDir, "config")); string(b) != string(config) {
		t.Errorf(".git/config after the call = %q, %v; want %q", b, err, config)
	}
	if after, _ := os.ReadDir(filepath.Join(gitDir, "hooks")); len(after) != len(hooks) {
		t.Errorf(".git/hooks held %d entries, then %d: %v", len(hooks), len(after), after)
	}
	checkNothingRan(t, e.workspace, pwned)
}

// TestGuardRenamedParent: a command renames the directory above a
// protected git dir (.git/modules, .git/worktrees), which takes the
// binds on the git dir along, and puts a copy with planted code in its
// place. Under a namespace the rename fails (every directory on the way
// is pinned); with snapshots the protected files are put back in the
// copy. Either way nothing planted runs.
func TestGuardRenamedParent(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name+"/modules", func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			sub, _ := withSubmodule(t, e)
			plant := fmt.Sprintf(`cd .git && mv modules modules.old && cp -a modules.old modules
printf '[core]\n\tfsmonitor = "touch %[1]s/fsmonitor; false"\n' >> modules/sub/config
printf '#!/bin/sh\ntouch %[1]s/hook\n' > modules/sub/hooks/pre-commit && chmod +x modules/sub/hooks/pre-commit
echo forged`, pwned)
			t.Logf("call: %q", e.call(bashReq(plant, "")).text())
			gitRun(t, e.workspace, "status")
			checkNothingRan(t, sub, pwned)
		})
		t.Run(m.name+"/worktrees", func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			newRepo(t, e.workspace)
			linked := filepath.Join(e.dir, "linked")
			gitRun(t, e.workspace, "worktree", "add", "-q", linked, "-b", "linked")
			forged := filepath.Join(e.workspace, "forged")
			plant := fmt.Sprintf(`git init -q --bare %[2]s && git --git-dir=%[2]s config core.fsmonitor "touch %[1]s/commondir; false"
cd .git && mv worktrees worktrees.old && cp -a worktrees.old worktrees && echo %[2]s > worktrees/linked/commondir
echo forged`, pwned, forged)
			t.Logf("call: %q", e.call(bashReq(plant, "")).text())
			checkNothingRan(t, linked, pwned)
		})
	}
}

// TestGuardLinkToGitDir: a submodule whose git dir is reached through a
// symlink (.git/modules/sub, moved elsewhere and linked): a command that
// replaces the link with a forged copy of the git dir has the link put
// back after the call.
func TestGuardLinkToGitDir(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			sub, modDir := withSubmodule(t, e)
			linkGitDir(t, e, modDir)
			plant := fmt.Sprintf(`rm .git/modules/sub && cp -a moved-sub-git .git/modules/sub
printf '[core]\n\tfsmonitor = "touch %[1]s/fsmonitor; false"\n' >> .git/modules/sub/config
echo forged`, pwned)
			t.Logf("call: %q", e.call(bashReq(plant, "")).text())
			if target, err := os.Readlink(modDir); err != nil || target != "../../moved-sub-git" {
				t.Errorf("the link to the submodule's git dir after the call: %q, %v", target, err)
			}
			checkNothingRan(t, sub, pwned)
		})
	}
}

// linkGitDir moves a submodule's git dir to moved-sub-git at the top of
// the workspace and links it from where it was.
func linkGitDir(t *testing.T, e *testEnv, modDir string) {
	t.Helper()
	if err := os.Rename(modDir, filepath.Join(e.workspace, "moved-sub-git")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../moved-sub-git", modDir); err != nil {
		t.Fatal(err)
	}
}

// TestGuardGitRemovals: with snapshots, git's own removal of a linked
// worktree or of a submodule's git dir is no restore failure, and the
// removed git dir is not made again (empty, which would keep git from
// adding the submodule again).
func TestGuardGitRemovals(t *testing.T) {
	requireABI(t, 1)
	snapshot := mechanisms[1].env
	t.Run("worktree", func(t *testing.T) {
		e, _ := plantEnv(t, snapshot)
		newRepo(t, e.workspace)
		if text := e.call(bashReq("git worktree add -q wt -b wt && echo added", "")).text(); !strings.HasPrefix(text, "added\n") {
			t.Fatalf("add: %q", text)
		}
		text := e.call(bashReq("git worktree remove wt && echo removed", "")).text()
		if !strings.HasPrefix(text, "removed\n") || strings.Contains(text, "could not restore") {
			t.Errorf("git worktree remove: %q", text)
		}
	})
	t.Run("submodule", func(t *testing.T) {
		e, _ := plantEnv(t, snapshot)
		_, modDir := withSubmodule(t, e)
		text := e.call(bashReq("git rm -q -f sub && rm -rf .git/modules/sub && echo removed", "")).text()
		if !strings.HasPrefix(text, "removed\n") || strings.Contains(text, "could not restore") {
			t.Errorf("removing a submodule: %q", text)
		}
		if _, err := os.Lstat(modDir); err == nil {
			t.Errorf("the submodule's git dir, removed, was made again")
		}
	})
}

// TestGuardReachIntoShared: a workspace outside the shared directories
// whose git dir lies in one (a worktree of a repository in /tmp), or
// whose submodule is linked into one, is not refused when another
// session fills that part with more than a call protects (worktrees, or
// a .gitmodules of long paths); what the workspace itself reaches there
// first (its own git dir's files) stays protected.
func TestGuardReachIntoShared(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name+"/worktrees", func(t *testing.T) {
			e, main, wsA := sharedWorktreeEnv(t, m.env)
			fill := fmt.Sprintf("for i in $(seq %d); do mkdir -p %s/.git/worktrees/x$i; done; echo filled", maxGuardEntries/3+1, main)
			if text := e.call(sessionCall(fill, "B", e.workspace, "")).text(); text != "filled\n" {
				t.Fatalf("filling: %q", text)
			}
			gitDir := filepath.Join(main, ".git", "worktrees", "wsA")
			plant := "printf '[core]\\n\\tfsmonitor = touch /nowhere\\n' > " + gitDir + "/config.worktree; echo planted > " + main + "/.git/hooks/pre-commit; echo ran"
			text := e.call(sessionCall(plant, "A", wsA, "")).text()
			if !strings.HasPrefix(text, "ran\n") {
				t.Errorf("session A's call, its repository's worktrees filled by another session: %q", text)
			}
			if _, err := os.Lstat(filepath.Join(gitDir, "config.worktree")); err == nil {
				t.Error("a config.worktree was planted in A's own git dir")
			}
			checkUnplanted(t, filepath.Join(main, ".git", "hooks", "pre-commit"), main)
		})
		t.Run(m.name+"/submodule", func(t *testing.T) {
			e, shared := sharedRootEnv(t, m.env)
			newRepo(t, e.workspace)
			subrepo := filepath.Join(shared, "subrepo")
			newRepo(t, subrepo)
			if err := os.Symlink(subrepo, filepath.Join(e.workspace, "sub")); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(e.workspace, ".gitmodules"), []byte("[submodule \"sub\"]\n\tpath = sub\n"), 0o644)
			long := strings.TrimSuffix(strings.Repeat("d/", 40), "/")
			fill := fmt.Sprintf(`for i in $(seq %d); do printf '[submodule "m%%s"]\n\tpath = %s/%%s\n' $i $i; done > %s/.gitmodules; echo filled`, maxSubmodules, long, subrepo)
			asOtherSession(t, e, fill, "filled\n")
			text := e.call(bashReq("echo planted > sub/.git/hooks/pre-commit; echo ran", "")).text()
			if !strings.HasPrefix(text, "ran\n") {
				t.Errorf("a call whose submodule, linked into a shared directory, was filled by another session: %q", text)
			}
			checkUnplanted(t, filepath.Join(subrepo, ".git", "hooks", "pre-commit"), subrepo)
		})
	}
}

// TestGuardGitDirRemade: a command takes a submodule's git dir apart in
// one call (its HEAD removed, or the whole git dir, kept aside) so that
// the next call's scan sees no git dir where the submodule's .git file
// points, and then puts it back with a planted config. The git dir a
// .git file names is protected whether or not it is one (or exists) at
// the call's start, so nothing planted stays.
func TestGuardGitDirRemade(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		for _, apart := range []string{
			"mv .git/modules/sub/HEAD head.kept",
			"cp -a .git/modules/sub sub-git.kept && rm -rf .git/modules/sub",
		} {
			t.Run(m.name+"/"+strings.Fields(apart)[0], func(t *testing.T) {
				e, pwned := plantEnv(t, m.env)
				sub, _ := withSubmodule(t, e)
				t.Logf("apart: %q", e.call(bashReq(apart+"; echo done", "")).text())
				remake := fmt.Sprintf(`[ -d sub-git.kept ] && rm -rf .git/modules/sub && cp -a sub-git.kept .git/modules/sub
[ -f head.kept ] && mv head.kept .git/modules/sub/HEAD
printf '[core]\n\tfsmonitor = "touch %s/fsmonitor; false"\n' >> .git/modules/sub/config
echo remade`, pwned)
				t.Logf("remake: %q", e.call(bashReq(remake, "")).text())
				checkNothingRan(t, sub, pwned)
			})
		}
	}
}

// TestGuardDeepShared: a repository thousands of directories deep in a
// directory every session writes, named in its .gitmodules, does not
// fail other sessions' confined calls (every directory on the way to a
// git dir is pinned, each an argument of the launcher: they are bounded).
func TestGuardDeepShared(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, shared := sharedRootEnv(t, m.env)
			deep := strings.TrimSuffix(strings.Repeat("a/", 1900), "/")
			plant := fmt.Sprintf(`cd %s && mkdir -p %s && git -C %s init -q && printf '[submodule "x"]\n\tpath = %s\n' > .gitmodules && echo planted`, shared, deep, deep, deep)
			asOtherSession(t, e, plant, "planted\n")
			if text := e.call(bashReq("echo ran", "")).text(); text != "ran\n" {
				t.Errorf("a call beside a deep repository in a shared directory: %q", text)
			}
		})
	}
}

// TestGuardCheckoutRenamed: the directory that holds a submodule's
// checkout can be renamed (it is not pinned), and a .git file forged in
// a new directory of the old name is put back after the call.
func TestGuardCheckoutRenamed(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			sub, _ := withSubmodule(t, e)
			gitFile, _ := os.ReadFile(filepath.Join(sub, ".git"))
			if text := e.call(bashReq("mv sub sub2 && mv sub2 sub && echo renamed", "")).text(); !strings.HasPrefix(text, "renamed\n") {
				t.Errorf("renaming a submodule's checkout: %q", text)
			}
			forge := fmt.Sprintf(`git init -q --bare /tmp/bashcall-forged-sub && git --git-dir=/tmp/bashcall-forged-sub config core.fsmonitor "touch %s/fsmonitor; false"
mv sub sub.old && mkdir sub && echo 'gitdir: /tmp/bashcall-forged-sub' > sub/.git && echo forged`, pwned)
			defer os.RemoveAll("/tmp/bashcall-forged-sub")
			t.Logf("forge: %q", e.call(bashReq(forge, "")).text())
			if b, _ := os.ReadFile(filepath.Join(sub, ".git")); string(b) != string(gitFile) {
				t.Errorf("sub/.git after the call = %q, want %q", b, gitFile)
			}
		})
	}
}

// TestGuardLinkUndone: where a symlink led to a submodule's git dir, a
// call that moves the git dir back in place of the link (undoing the
// layout) has the link put back and the git dir, with its commits, kept
// beside it rather than removed.
func TestGuardLinkUndone(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, _ := plantEnv(t, m.env)
			_, modDir := withSubmodule(t, e)
			linkGitDir(t, e, modDir)
			t.Logf("call: %q", e.call(bashReq("rm .git/modules/sub && mv moved-sub-git .git/modules/sub && echo undone", "")).text())
			kept, _ := filepath.Glob(modDir + ".bashcall-moved-*")
			if len(kept) != 1 || !isGitDir(kept[0]) {
				t.Errorf("the git dir moved in place of the link was not kept: %v", kept)
			}
		})
	}
}

// TestGuardSubmoduleForgotten: a command cuts a submodule from
// .gitmodules and removes its git dir in one call, so that the next
// call's scan finds nothing leading to the checkout, and then points the
// checkout's .git at a forged git dir. The checkouts that earlier calls
// found are remembered (in the session's state), and their .git stays
// protected.
func TestGuardSubmoduleForgotten(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			sub, _ := withSubmodule(t, e)
			gitFile, _ := os.ReadFile(filepath.Join(sub, ".git"))
			cut := "cp -a .git/modules/sub evil-git && git config -f .gitmodules --remove-section submodule.sub && rm -rf .git/modules/sub; echo cut"
			t.Logf("cut: %q", e.call(sessionCall(cut, "S", e.workspace, "")).text())
			forge := fmt.Sprintf(`git config -f evil-git/config --unset core.worktree; git config -f evil-git/config core.fsmonitor "touch %s/fsmonitor; false"
echo "gitdir: $PWD/evil-git" > sub/.git; git checkout -q .gitmodules; echo forged`, pwned)
			t.Logf("forge: %q", e.call(sessionCall(forge, "S", e.workspace, "")).text())
			if b, _ := os.ReadFile(filepath.Join(sub, ".git")); string(b) != string(gitFile) && strings.Contains(string(b), "evil-git") {
				t.Errorf("sub/.git after the call = %q", b)
			}
			gitRun(t, e.workspace, "status")
			gitRun(t, sub, "status")
			if planted, _ := os.ReadDir(pwned); len(planted) > 0 {
				t.Errorf("planted code ran: %v", planted)
			}
		})
	}
}

// TestGuardChmodded: an unprivileged command that plants and then takes
// the owner's write bit off the git dir (chmod 555, which Landlock does
// not govern) does not keep what it planted: the restore gives the
// directories on its way their owner's rwx back. With a namespace, a
// forged .git directory of mode 555 in place of a submodule's .git file
// (after renaming the checkout's directory away) is moved aside.
func TestGuardChmodded(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name+"/gitdir", func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			newRepo(t, e.workspace)
			os.Chmod(pwned, 0o777)
			e.asNobody()
			plant := fmt.Sprintf(`cp -a .git evil && git --git-dir=evil config core.fsmonitor "touch %[1]s/commondir; false" && echo "$PWD/evil" > .git/commondir
git config core.fsmonitor "touch %[1]s/config; false" 2>/dev/null
chmod 555 .git; echo done`, pwned)
			t.Logf("call: %q", e.call(bashReq(plant, "")).text())
			checkNothingRanAs(t, e.workspace, pwned)
		})
		t.Run(m.name+"/checkout", func(t *testing.T) {
			e, pwned := plantEnv(t, m.env)
			withSubmodule(t, e)
			e.asNobody()
			plant := fmt.Sprintf(`mv sub sub2 && mkdir sub && cp -a .git/modules/sub sub/.git && git config -f sub/.git/config --unset core.worktree
git config -f sub/.git/config core.fsmonitor "touch %s/sub; false"; chmod 555 sub/.git; echo done`, pwned)
			t.Logf("call: %q", e.call(bashReq(plant, "")).text())
			checkNothingRanAs(t, e.workspace, pwned)
		})
	}
}

// TestGuardGitDirMovedAway: with snapshots, a repository's own git dir
// (its .git directory, or where a .git symlink leads) moved away in one
// call is made again with its recorded files, so that moving it back
// with a planted config in the next call plants nothing.
func TestGuardGitDirMovedAway(t *testing.T) {
	requireABI(t, 1)
	snapshot := mechanisms[1].env
	for _, linked := range []bool{false, true} {
		t.Run(fmt.Sprint("linked=", linked), func(t *testing.T) {
			e, pwned := plantEnv(t, snapshot)
			newRepo(t, e.workspace)
			gitDir := ".git"
			if linked {
				os.Rename(filepath.Join(e.workspace, ".git"), filepath.Join(e.workspace, "repo.git"))
				os.Symlink("repo.git", filepath.Join(e.workspace, ".git"))
				gitDir = "repo.git"
			}
			t.Logf("away: %q", e.call(bashReq("mv "+gitDir+" kept && echo away", "")).text())
			back := fmt.Sprintf(`git --git-dir=kept config core.fsmonitor "touch %s/fsmonitor; false" && rm -rf %s && mv kept %s && echo back`, pwned, gitDir, gitDir)
			t.Logf("back: %q", e.call(bashReq(back, "")).text())
			checkNothingRanAs(t, e.workspace, pwned)
		})
	}
}

// TestGuardOwnWorktreePadded: a workspace that is a linked worktree of a
// repository in a shared directory, whose command fills its own worktree
// git dir with directories (to spend the budget that never refuses),
// still has the main repository's config protected: every git dir's own
// files are recorded before any worktrees or modules are listed.
func TestGuardOwnWorktreePadded(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, main, wsA := sharedWorktreeEnv(t, m.env)
			pad := fmt.Sprintf(`g=$(git rev-parse --git-dir); for i in $(seq %d); do mkdir -p "$g/worktrees/w$i"; done; echo padded`, maxGuardEntries/3+1)
			t.Logf("pad: %q", e.call(sessionCall(pad, "A", wsA, "")).text())
			e.call(sessionCall("git config core.fsmonitor 'touch /nowhere'; echo planted > "+main+"/.git/hooks/pre-commit; true", "A", wsA, ""))
			checkUnplanted(t, filepath.Join(main, ".git", "hooks", "pre-commit"), main)
		})
	}
}

// checkNothingRanAs is checkNothingRan for a repository another user
// owns (git's safe.directory): git runs as the person would, and nothing
// planted may run.
func checkNothingRanAs(t *testing.T, repo, pwned string) {
	t.Helper()
	for _, args := range [][]string{{"status"}, {"diff"}, {"log", "-1"}} {
		gitRun(t, repo, append([]string{"-c", "safe.directory=*"}, args...)...)
	}
	if planted, _ := os.ReadDir(pwned); len(planted) > 0 {
		t.Errorf("planted code ran: %v", planted)
	}
}

// TestGuardLinkReplanted: with snapshots, a background task that keeps
// putting a symlink where a directory on the way to protected files was
// (.git/modules, to a forged copy) has each repair count as a revert: it
// is stopped as a task that plants again is.
func TestGuardLinkReplanted(t *testing.T) {
	requireABI(t, 1)
	e, _ := plantEnv(t, mechanisms[1].env)
	withSubmodule(t, e)
	loop := `mkdir -p forged && cp -a .git/modules/sub forged/sub && mv .git/modules .git/real-modules
while :; do [ -L .git/modules ] || { rmdir .git/modules 2>/dev/null; ln -s ../forged .git/modules; }; sleep 0.02; done`
	start := e.call(sessionCall(loop, "S", e.workspace, `"run_in_background":true`))
	if start.text() != textStarted("bash-1") {
		t.Fatalf("start: %q", start.text())
	}
	t.Cleanup(func() { e.call(sessionReq("bash_kill", `{"task_id":"bash-1"}`, "S")) })
	text := e.call(sessionReq("bash_output", `{"task_id":"bash-1","wait":true,"timeout_ms":15000}`, "S")).text()
	if !strings.Contains(text, "[status: killed") || !strings.Contains(text, "reverted changes to protected files") {
		t.Errorf("a task putting a symlink back again and again: %q", text)
	}
}

// TestGuardLongLinksShared: a submodule path of the workspace's
// .gitmodules that leads through a symlink into a shared directory, where
// another session makes a chain of long symlinks, does not refuse the
// workspace's calls: the kernel resolves the path, at its own limits'
// cost, not a budget of names.
func TestGuardLongLinksShared(t *testing.T) {
	requireABI(t, 1)
	e, shared := sharedRootEnv(t, nil)
	newRepo(t, e.workspace)
	libs := filepath.Join(shared, "libs")
	os.MkdirAll(filepath.Join(libs, "sub"), 0o755)
	os.Symlink(libs, filepath.Join(e.workspace, "libs"))
	os.WriteFile(filepath.Join(e.workspace, ".gitmodules"), []byte("[submodule \"sub\"]\n\tpath = libs/sub\n"), 0o644)
	if text := e.call(bashReq("echo ran", "")).text(); text != "ran\n" {
		t.Fatalf("before: %q", text)
	}
	chain := fmt.Sprintf(`cd %s && rm -rf sub && dots=$(printf './%%.0s' $(seq 2040)) && for i in $(seq 12); do ln -s "${dots}l$((i+1))" l$i; done && mkdir l13 && ln -s "${dots}l1" sub && echo chained`, libs)
	asOtherSession(t, e, chain, "chained\n")
	if text := e.call(bashReq("echo ran", "")).text(); text != "ran\n" {
		t.Errorf("a call whose submodule path leads through another session's chain of links: %q", text)
	}
}

// TestGuardPointerAtProject: a workspace's .git file naming a project's
// directory (with a config/ directory of its own, not a git dir) has
// nothing of that project protected: its config/ is no git config, so
// edits there are not reverted, and no hooks/ is made in it.
func TestGuardPointerAtProject(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e, shared := sharedRootEnv(t, m.env)
			project := filepath.Join(shared, "B")
			os.MkdirAll(filepath.Join(project, "config"), 0o755)
			os.WriteFile(filepath.Join(project, "config", "app.yml"), []byte("orig\n"), 0o644)
			os.WriteFile(filepath.Join(e.workspace, ".git"), []byte("gitdir: "+project+"\n"), 0o644)
			edit := "echo edited > " + project + "/config/app.yml && echo new > " + project + "/config/new.yml && echo ran"
			if text := e.call(bashReq(edit, "")).text(); !strings.HasPrefix(text, "ran\n") {
				t.Errorf("the call: %q", text)
			}
			if b, _ := os.ReadFile(filepath.Join(project, "config", "app.yml")); string(b) != "edited\n" {
				t.Errorf("the project's config/app.yml after the call = %q", b)
			}
			if _, err := os.Stat(filepath.Join(project, "config", "new.yml")); err != nil {
				t.Errorf("a new file in the project's config/ was removed: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(project, "hooks")); err == nil {
				t.Error("a hooks/ was made in the project")
			}
		})
	}
}

// TestGuardRememberedOrdinary: remembering a workspace's submodule
// checkouts does not get in ordinary work's way: a confined git
// submodule update of a checkout not made yet keeps the .git it writes,
// and a checkout replaced by a symlink (git rm, ln -s) is left a symlink.
func TestGuardRememberedOrdinary(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name+"/update", func(t *testing.T) {
			e, _ := plantEnv(t, m.env)
			sub, _ := withSubmodule(t, e)
			gitRun(t, e.workspace, "submodule", "deinit", "-q", "-f", "sub")
			gitRun(t, e.workspace, "submodule", "init", "-q")
			e.call(sessionCall("echo first", "S", e.workspace, ""))
			text := e.call(sessionCall("git -c protocol.file.allow=always submodule update -q && echo updated", "S", e.workspace, "")).text()
			if _, err := os.Lstat(filepath.Join(sub, ".git")); err != nil {
				t.Errorf("the .git a confined git submodule update wrote is gone (%v): %q", err, text)
			}
		})
		t.Run(m.name+"/symlink", func(t *testing.T) {
			e, _ := plantEnv(t, m.env)
			sub, _ := withSubmodule(t, e)
			e.call(sessionCall("echo first", "S", e.workspace, ""))
			gitRun(t, e.workspace, "rm", "-q", "sub")
			os.Mkdir(filepath.Join(e.workspace, "other"), 0o755)
			if err := os.Symlink("other", sub); err != nil {
				t.Fatal(err)
			}
			if text := e.call(sessionCall("echo second", "S", e.workspace, "")).text(); text != "second\n" {
				t.Errorf("a call after a checkout was replaced by a symlink: %q", text)
			}
			if target, err := os.Readlink(sub); err != nil || target != "other" {
				t.Errorf("the symlink that replaced a checkout: %q, %v", target, err)
			}
		})
	}
}

// asOtherSession runs script as a call of session B, in a workspace of
// its own, and fails the test unless it answers want.
func asOtherSession(t *testing.T, e *testEnv, script, want string) {
	t.Helper()
	wsB := filepath.Join(e.dir, "wsB")
	os.MkdirAll(wsB, 0o755)
	if text := e.call(sessionCall(script, "B", wsB, "")).text(); text != want {
		t.Fatalf("session B's call: %q", text)
	}
}
