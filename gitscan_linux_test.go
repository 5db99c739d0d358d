package main

// The scan of writable directories for git files to protect, as a
// hostile command can shape them: symlinks on the way, files that are not
// regular, more files than a call protects.

import (
	"errors"
	"fmt"
	"os"
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
// .gitmodules, or as the commondir a .git file leads to) does not hang
// the next call, and a sparse .gitmodules of gigabytes is not read.
func TestGitFilesNotRegular(t *testing.T) {
	requireABI(t, 1)
	for _, plant := range []string{
		"mkfifo .gitmodules",
		"mkdir g && mkfifo g/commondir && echo 'gitdir: g' > .git",
		"truncate -s 2G .gitmodules",
	} {
		t.Run(plant, func(t *testing.T) {
			e := newConfinedEnv(t, "")
			if text := e.call(bashReq(plant+" && echo planted", "")).text(); text != "planted\n" {
				t.Fatalf("planting: %q", text)
			}
			c := e.cmd("-text")
			c.Stdin = strings.NewReader(bashReq("echo ran", ""))
			done := make(chan []byte, 1)
			go func() { out, _ := c.Output(); done <- out }()
			select {
			case out := <-done:
				if string(out) != "ran\n" {
					t.Errorf("the next call: %q", out)
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
