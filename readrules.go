package main

// Read confinement (PROTOCOL.md section 7, "Reads"). Landlock only grants:
// it cannot withhold a subtree of a directory it grants. So to keep a
// confined command out of a few paths (the state dir, [sandbox] deny_read)
// while everything else stays readable, the grant is built around them:
// every ancestor of a withheld path is "split", and instead of a rule on
// it, each of its entries that is neither split nor withheld gets a read
// rule of its own. A split directory itself cannot be listed (a rule
// granting READ_DIR on it would cover the whole subtree), and an entry
// created in it after the launcher listed it is not readable by that
// call. Paths the model was given (spill files, full-output files) lie in
// a directory granted READ_FILE alone: readable by exact path, unlistable.

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// readGrant is what a confined call may read.
type readGrant struct {
	Denied    []string // canonical paths withheld, there or not
	FilesOnly []string // directories whose files are readable by exact path
}

// confined reports whether reads are confined at all.
func (g readGrant) confined() bool { return len(g.Denied) > 0 }

// sameGrant reports whether a and b withhold and grant the same paths.
func sameGrant(a, b readGrant) bool {
	return slices.Equal(a.Denied, b.Denied) && slices.Equal(a.FilesOnly, b.FilesOnly)
}

// listDir lists a directory's entries; planReadRules takes it as a
// parameter so that it stays a pure function in tests.
type listDir func(dir string) ([]fs.DirEntry, error)

// devAllowed are the entries of /dev a confined command may read: the
// character devices every program expects and the directory of shared
// memory. Block devices and the rest of /dev are
// withheld: a root command could otherwise read any file, withheld ones
// included, straight off the disk. So is /dev/pts: its terminals are the
// user's others (a confined command has none of its own, nor can it make
// one: /dev/ptmx opens read-only), and reading one takes what is typed
// there. So is /dev/mqueue: a queue of the host's opened there, even
// read-only, gives mq_receive its messages (a private IPC namespace keeps
// mq_open to the command's own).
var devAllowed = map[string]bool{"null": true, "zero": true, "full": true, "random": true, "urandom": true,
	"tty": true, "ptmx": true, "shm": true}

// splitPlan is what the grant is built around: the withheld paths that
// lie beneath no other withheld path (one beneath another is withheld
// with it: splitting the directories between them would grant their
// other entries), and the split directories, every ancestor of those
// and /dev.
func splitPlan(g readGrant) (denied, split map[string]bool) {
	all := make(map[string]bool, len(g.Denied))
	for _, d := range g.Denied {
		all[d] = true
	}
	denied, split = map[string]bool{}, map[string]bool{}
	for _, d := range g.Denied {
		nested := false
		for p := filepath.Dir(d); p != filepath.Dir(p) && !nested; p = filepath.Dir(p) {
			nested = all[p]
		}
		if !nested {
			denied[d] = true
		}
	}
	for d := range denied {
		for p := filepath.Dir(d); !split[p]; p = filepath.Dir(p) {
			split[p] = true // up to "/", or "." for a path not absolute
		}
	}
	split["/dev"] = true
	for d := range denied {
		delete(split, d) // a withheld path is never listed
	}
	return denied, split
}

// sortedKeys is m's keys in order: parents before what lies beneath them.
func sortedKeys(m map[string]bool) []string {
	keys := slices.Collect(maps.Keys(m))
	sort.Strings(keys)
	return keys
}

// planReadRules is the read rules around g.Denied, at the rights a mode
// reads with. Without anything denied it is one rule on "/" (and /dev is
// then not filtered: reads are not confined at all).
func planReadRules(g readGrant, read accessFS, list listDir) []landlockRule {
	if !g.confined() {
		return []landlockRule{{Path: "/", Access: read}}
	}
	denied, split := splitPlan(g)
	var rules []landlockRule
	for _, s := range sortedKeys(split) {
		entries, err := list(s)
		if err != nil {
			continue // not there, or unreadable to bashcall: nothing to grant beneath
		}
		for _, e := range entries {
			p := filepath.Join(s, e.Name())
			if denied[p] || e.Type()&fs.ModeSymlink != 0 || split[p] && e.IsDir() {
				continue // a symlink is followed to a path granted on its own
			}
			if s == "/dev" && !devAllowed[e.Name()] {
				continue
			}
			// A split path that is not a directory holds nothing: a
			// deny_read path beneath a file is not there. Its rule
			// grants nothing should it be a directory by the launch.
			rules = append(rules, landlockRule{Path: p, Access: read, Entry: true, NotDir: split[p]})
		}
	}
	for _, f := range g.FilesOnly {
		rules = append(rules, landlockRule{Path: f, Access: accessReadFile})
	}
	return rules
}

// defaultDenyRead is [sandbox] deny_read's default (PROTOCOL.md section 1).
var defaultDenyRead = []string{"~/.ssh", "~/.gnupg", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.kube", "~/.docker",
	"~/.netrc", "~/.git-credentials", "~/.config/gh", "~/.npmrc", "~/.pypirc"}

// deniedPaths expands deny_read (~ is home) and adds bashcall's own
// directories (the state dir, the spool dir), each canonical. A path that
// does not exist is kept, resolved as the kernel will resolve it once it
// exists (canonicalPrefix): its parent is split, so that it is withheld
// should it appear before the launch (made while the call waits for an
// approval, say) rather than granted as one more entry.
func deniedPaths(denyRead []string, home string, own ...string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		c := canonicalPrefix(p)
		if seen[c] || c == "/" {
			return
		}
		seen[c] = true
		out = append(out, c)
	}
	for _, p := range denyRead {
		switch {
		case p == "~":
			p = home
		case strings.HasPrefix(p, "~/"):
			if home == "" {
				continue
			}
			p = filepath.Join(home, p[2:])
		}
		if filepath.IsAbs(p) {
			add(p)
		}
	}
	for _, d := range own {
		if d != "" {
			add(d)
		}
	}
	sort.Strings(out)
	return out
}

// osListDir is listDir on the real filesystem.
func osListDir(dir string) ([]fs.DirEntry, error) { return os.ReadDir(dir) }
