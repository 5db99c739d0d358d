package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestIndexGitlinks: the gitlinks read off indexes git itself wrote, of
// every version, with extended flags, split, of a sha256 repository, with
// a long path, are those git lists.
func TestIndexGitlinks(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	for _, c := range []struct {
		name string
		init []string
		prep [][]string
	}{
		{"v2", nil, [][]string{{"update-index", "--index-version", "2"}}},
		{"v3", nil, [][]string{{"add", "-N", "new.txt"}, {"update-index", "--index-version", "3"}}},
		{"v4", nil, [][]string{{"add", "-N", "new.txt"}, {"update-index", "--index-version", "4"}}},
		{"split", nil, [][]string{{"update-index", "--split-index"}}},
		{"sha256", []string{"--object-format=sha256"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			git := func(args ...string) string {
				t.Helper()
				cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
				return strings.TrimSpace(string(out))
			}
			git(append([]string{"init", "-q"}, c.init...)...)
			for _, f := range []string{"a.txt", "new.txt", "z/deep/b.txt"} {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
				os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644)
			}
			git("add", "a.txt", "z")
			git("commit", "-qm", "first")
			head := git("rev-parse", "HEAD")
			long := strings.Repeat("l", 250) + "/" + strings.Repeat("m", 250) + "/" + strings.Repeat("n", 3700)
			for _, p := range []string{"sub", "a/b/sub2", "z/deep/sub3", "zz", long} {
				git("update-index", "--add", "--cacheinfo", "160000,"+head+","+p)
			}
			for _, args := range c.prep {
				git(args...)
			}
			git("add", "a.txt") // an index written again, in the version and shape set
			var want []string
			for _, l := range strings.Split(git("ls-files", "-s"), "\n") {
				if strings.HasPrefix(l, "160000 ") {
					want = append(want, l[strings.Index(l, "\t")+1:])
				}
			}
			got, complete, err := indexGitlinks(filepath.Join(dir, ".git"), maxIndexBytes, 100)
			if err != nil || !complete {
				t.Fatalf("indexGitlinks: %v, complete %v", err, complete)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) || len(want) != 5 {
				t.Errorf("gitlinks = %q, want %q", got, want)
			}
			if c.name == "split" {
				if m, _ := filepath.Glob(filepath.Join(dir, ".git", "sharedindex.*")); len(m) == 0 {
					t.Error("no shared index was written")
				}
			}
			if got, complete, _ := indexGitlinks(filepath.Join(dir, ".git"), maxIndexBytes, 2); len(got) != 2 || complete {
				t.Errorf("two at most: %q, complete %v", got, complete)
			}
		})
	}
}

// FuzzIndexGitlinks: no index, however malformed, panics or hangs the
// reading of it.
func FuzzIndexGitlinks(f *testing.F) {
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"))
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x02" + strings.Repeat("\x00", 24) + "\x00\x00\xe0\x00" + strings.Repeat("\x00", 34) + "\x00\x03sub\x00"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		g := filepath.Join(dir, fmt.Sprint(len(b)))
		os.MkdirAll(g, 0o755)
		os.WriteFile(filepath.Join(g, "index"), b, 0o644)
		indexGitlinks(g, 1<<20, 100)
	})
}
