package main

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
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

// TestIndexGitlinksAsGitReads: indexes shaped by hand, where reading a
// name up to its NUL and reading it as git does (its length from the
// flags) part ways, give the gitlinks git lists (or, where git cannot
// read one, no complete reading).
func TestIndexGitlinksAsGitReads(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	sha := bytes.Repeat([]byte{0xab}, 20)
	// entry is an index entry: v2/v3 padded to eight bytes with pad, v4
	// with strip (a varint below 128) before the name and no padding.
	entry := func(version int, name string, mode uint32, length int, pad byte, strip int) []byte {
		e := make([]byte, 40)
		binary.BigEndian.PutUint32(e[24:], mode)
		e = append(e, sha...)
		e = binary.BigEndian.AppendUint16(e, uint16(length))
		if version == 4 {
			return append(append(append(e, byte(strip)), name...), 0)
		}
		e = append(e, name...)
		for len(e)%8 != 0 || len(e) == 62+len(name) {
			e = append(e, pad)
		}
		return e
	}
	index := func(version int, entries ...[]byte) []byte {
		b := []byte("DIRC")
		b = binary.BigEndian.AppendUint32(b, uint32(version))
		b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
		for _, e := range entries {
			b = append(b, e...)
		}
		sum := sha1.Sum(b)
		return append(b, sum[:]...)
	}
	const file, link = 0o100644, 0o160000
	for _, c := range []struct {
		name  string
		index []byte
	}{
		// git takes "a" (length 1) and then the gitlink; up to the NUL,
		// the name runs into the next entry.
		{"padding-not-nul", index(2, entry(2, "a", file, 1, 'X', 0), entry(2, "sub", link, 3, 0, 0))},
		{"length-short", index(2, entry(2, "abc", file, 2, 0, 0), entry(2, "sub", link, 3, 0, 0))},
		{"nul-in-name", index(2, entry(2, "sub\x00zz", link, 6, 0, 0))},
		{"v4-first-strip", index(4, entry(4, "sub", link, 3, 0, 5))},
		{"v4-shared-prefix", index(4, entry(4, "lib/a", file, 5, 0, 0), entry(4, "sub", link, 7, 0, 1))},
		// git's path runs on past the name's length: no reading can say
		// where it enters.
		{"v4-length-short", index(4, entry(4, "lib/a", file, 5, 0, 0), entry(4, "sub", link, 5, 0, 1))},
		{"v4-padding-not-nul", index(4, entry(4, "lib/a", file, 5, 0, 0), entry(4, "sub", link, 6, 0, 1))},
		{"length-long", index(2, entry(2, "sub", link, 5, 0, 0))},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command("git", "init", "-q")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git init: %v %s", err, out)
			}
			os.WriteFile(filepath.Join(dir, ".git", "index"), c.index, 0o644)
			ls := exec.Command("git", "ls-files", "-s")
			ls.Dir = dir
			out, gitErr := ls.Output()
			var want []string
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "160000 ") {
					want = append(want, l[strings.Index(l, "\t")+1:])
				}
			}
			got, complete, err := indexGitlinks(filepath.Join(dir, ".git"), maxIndexBytes, 100)
			t.Logf("git: %q (%v); bashcall: %q, complete %v, %v", want, gitErr, got, complete, err)
			if gitErr != nil {
				if complete && err == nil {
					t.Errorf("git cannot read the index, bashcall read it whole: %q", got)
				}
				return
			}
			if (err != nil || !complete) && len(want) > 0 {
				return // not read to its end: moved aside after a call
			}
			if !slices.Equal(got, want) {
				t.Errorf("gitlinks = %q, git lists %q", got, want)
			}
		})
	}
}

// TestIndexGitlinksSplitReplaced: in a split index, an entry of the
// shared index replaced by a gitlink keeps its name only in the shared
// index (the main index's entry has none): the gitlink is found there,
// as git finds it, among entries deleted and added beside it.
func TestIndexGitlinksSplitReplaced(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	script := `git init -q && for f in a b c d e sub z; do echo $f > $f; done && git add -A &&
git -c user.name=t -c user.email=t@example.com commit -qm one && git update-index --split-index &&
h=$(git rev-parse HEAD) && git rm -q --cached b && git update-index --cacheinfo 160000,$h,sub --cacheinfo 160000,$h,d &&
echo n > n && git add n && git ls-files -s`
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var want []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "160000 ") {
			want = append(want, l[strings.Index(l, "\t")+1:])
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".git", "sharedindex.*")); len(m) == 0 {
		t.Fatal("no shared index was written")
	}
	got, complete, err := indexGitlinks(filepath.Join(dir, ".git"), maxIndexBytes, 100)
	slices.Sort(got)
	if err != nil || !complete || !slices.Equal(got, want) || len(want) != 2 {
		t.Errorf("gitlinks = %q (complete %v, %v), git lists %q", got, complete, err, want)
	}
}

// TestIndexGitlinksWorktreeSha256: a linked worktree's index, whose git
// dir has no config of its own, is read with its repository's object
// names (sha256 here, from the common dir's config); a config that names
// sha256 under repository format version 0, which git does not heed,
// does not count.
func TestIndexGitlinksWorktreeSha256(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	script := `git init -q --object-format=sha256 main && cd main && echo a > a && git add a &&
git -c user.name=t -c user.email=t@example.com commit -qm a && git worktree add -q ../wt && cd ../wt &&
git update-index --add --cacheinfo "160000,$(git rev-parse HEAD),sub" && cd .. && git init -q v0 && cd v0 &&
git update-index --add --cacheinfo "160000,$(git hash-object -w --stdin </dev/null),sub" && git config extensions.objectformat sha256`
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, g := range []string{"main/.git/worktrees/wt", "v0/.git"} {
		if got, complete, err := indexGitlinks(filepath.Join(dir, g), maxIndexBytes, 10); err != nil || !complete || !slices.Equal(got, []string{"sub"}) {
			t.Errorf("%s: gitlinks %q, complete %v, %v", g, got, complete, err)
		}
	}
}
