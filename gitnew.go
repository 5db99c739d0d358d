package main

// Repositories a call makes (PROTOCOL.md section 7). The guard protects
// what git runs code from in every repository a call starts with; a
// command can also make a repository where git goes later on its own:
// git init at the top of a workspace that was none, a .git file pointing
// at a git dir it made, the top made a git dir itself (git takes a
// directory whose .git is no git dir, its HEAD removed, for a bare
// repository when it holds HEAD, objects/ and refs/), a submodule added
// (.gitmodules and .git/modules), or a gitlink put in the index for a
// repository it made under the checkout: git status enters every gitlink
// whose checkout holds a repository, .gitmodules or not. So after the
// call, and at each sweep of a running task, each top the scan looked at
// is looked at again, and what git would reach from it that was no git
// dir before the call is made harmless, moved aside (NAME.bashcall-
// moved-RANDOM), never removed:
//
//   - the top's own new .git directory (git init), a new git dir under a
//     git dir's modules/ (git submodule add), and a new .git directory in
//     a checkout a gitlink or .gitmodules names (git add of a repository
//     made) keep their repository, but not its config, config.worktree,
//     commondir and hooks/;
//   - a new .git file or symlink at the top, or in such a checkout,
//     leading to a git dir that was none, is moved aside itself (what it
//     leads to may be another session's);
//   - a modules/ of more than a pass lists is moved aside whole, and past
//     what a pass looks at a new .git (a known one's index);
//   - the top made a git dir itself has its HEAD moved aside;
//   - an index that names more gitlinks (with .gitmodules' paths) than a
//     call protects, or that cannot be read to its end, is moved aside.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// repoWatch is one top the scan looked at, as it was before the call.
type repoWatch struct {
	Root   string `json:"root"` // the writable directory it lies in
	Top    string `json:"top"`
	Shaped bool   `json:"shaped,omitempty"` // the top was a git dir itself
	Own    bool   `json:"own,omitempty"`    // of the call's workspace
}

// maxNewRepos bounds the repositories looked at after the call from one
// top.
const maxNewRepos = 2048

// gitShaped reports whether git takes dir itself for a git dir: a HEAD
// file or symlink, with objects/ and refs/ or a commondir (whose objects
// and refs git takes).
func gitShaped(dir string) bool {
	if fi, err := os.Lstat(filepath.Join(dir, "HEAD")); err != nil || fi.IsDir() {
		return false
	}
	if _, err := os.Lstat(filepath.Join(dir, "commondir")); err == nil {
		return true
	}
	o, err := os.Stat(filepath.Join(dir, "objects"))
	if err != nil || !o.IsDir() {
		return false
	}
	r, err := os.Stat(filepath.Join(dir, "refs"))
	return err == nil && r.IsDir()
}

// newRepos is one pass over the watched tops.
type newRepos struct {
	roots    map[string]*os.Root // the writable directories, opened (restore's)
	dirs     []string            // their paths
	known    map[string]bool     // git dirs before the call
	handled  map[string]bool     // new git dirs made harmless in this pass
	seen     map[string]bool
	left     int // repositories a pass looks at from one top
	listed   int // directories of modules/ it lists
	own      bool
	reverted []string
	moved    []movedPath
	errs     []error
}

// undoNew makes harmless what git would reach from the watched tops that
// was no git dir before the call (see above), through roots; in a sweep
// (swept not nil), replanted says the task undid what a sweep did.
func (g *gitGuard) undoNew(roots map[string]*os.Root, swept *sweptRepos) (made []string, replanted bool, err error) {
	if g == nil || len(g.Watch) == 0 {
		return nil, false, nil
	}
	n := &newRepos{roots: roots, known: map[string]bool{}, handled: map[string]bool{}, seen: map[string]bool{}}
	for _, k := range g.Known {
		n.known[k] = true
	}
	for _, w := range g.Watch {
		if !slices.Contains(n.dirs, w.Root) {
			n.dirs = append(n.dirs, w.Root)
		}
	}
	// The writable directories are opened (n.root) only to move something
	// aside: most calls make no repository.
	for _, w := range g.Watch {
		n.left, n.listed, n.own = maxNewRepos, 0, w.Own
		if !w.Shaped && gitShaped(w.Top) {
			n.moveAside(w.Root, filepath.Join(w.Top, "HEAD"), false)
		}
		n.checkout(w.Root, w.Top, true)
	}
	if swept != nil {
		replanted = swept.replanted(n.moved)
	}
	return n.reverted, replanted, errors.Join(n.errs...)
}

// root is the open writable directory dir, opened on first use.
func (n *newRepos) root(dir string) (*os.Root, bool) {
	if r, ok := n.roots[dir]; ok {
		return r, r != nil
	}
	ownerRWXDir(dir)
	r, err := os.OpenRoot(dir)
	if err != nil {
		// Said once: nothing there can be looked at or moved aside.
		n.errs = append(n.errs, fmt.Errorf("looking at repositories made in %q: %w", dir, err))
		n.roots[dir] = nil
		return nil, false
	}
	n.roots[dir] = r
	return r, true
}

// checkout looks at the repository of checkout c (a top when top), in
// writable directory root.
func (n *newRepos) checkout(root, c string, top bool) {
	dotGit := filepath.Join(c, ".git")
	fi, err := os.Lstat(dotGit)
	if err != nil || n.seen[dotGit] {
		return
	}
	n.seen[dotGit] = true
	// Past what a pass looks at, git is kept from going on: a repository
	// made has its .git moved aside, a known one its index.
	n.left--
	over := n.left < 0 && !top
	if fi.IsDir() {
		switch {
		case !n.known[dotGit] && over:
			n.moveAside(root, dotGit, false)
		case over:
			n.moveAside(root, filepath.Join(dotGit, "index"), false)
		default:
			if !n.known[dotGit] {
				n.harmless(root, dotGit)
				n.handled[dotGit] = true
			}
			n.reach(root, dotGit, root, c)
		}
		return
	}
	dirs := gitDirsOf(c) // none: nothing git could run there
	for _, d := range dirs {
		if !n.known[d] && !n.handled[d] || over {
			// What it leads to may be another session's: the pointer
			// goes aside, not what it points at.
			n.moveAside(root, dotGit, false)
			return
		}
	}
	if len(dirs) > 0 {
		n.reach(containing(dirs[0], n.dirs), dirs[0], root, c)
	}
}

// reach looks at what git enters from git dir g (in writable directory
// gRoot, or none), checked out at c (in cRoot): the git dirs under its
// modules/, and the checkouts its index's gitlinks and c's .gitmodules
// name. A git dir no command can write has no modules made, but its
// gitlinks still lead into c.
func (n *newRepos) reach(gRoot, g, cRoot, c string) {
	if gRoot != "" {
		n.modules(gRoot, filepath.Join(g, "modules"), filepath.Join(g, "modules"))
	}
	subs, complete := submodulePaths(c)
	if complete {
		subs, complete = withGitlinks(subs, c, []string{g}, n.own)
	}
	if !complete && gRoot != "" {
		// More than the next call would protect (it would be refused),
		// or an index not read to its end: git is left no index to
		// enter gitlinks from.
		n.moveAside(gRoot, filepath.Join(g, "index"), false)
	}
	for _, s := range subs {
		p := filepath.Join(c, filepath.Clean(s))
		if !within(p, c) || p == c || !n.plainWay(cRoot, p) {
			continue
		}
		n.checkout(cRoot, p, false)
	}
}

// modules looks at the git dirs under modules (a modules/ directory of a
// git dir; names nest, modules/a/b, and so do submodules, as deep as git
// lets them), dir the part being listed. More than a pass lists, or a
// directory of more entries than it lists, has the whole modules/ moved
// aside: git then finds none of its submodules' git dirs, and clones them
// again from their URLs. false: it was.
func (n *newRepos) modules(root, modules, dir string) bool {
	if n.listed++; n.listed > maxGuardEntries {
		n.moveAside(root, modules, false)
		return false
	}
	entries, err := readDirBounded(dir)
	if errors.Is(err, errTooLarge) {
		n.moveAside(root, modules, false)
		return false
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		m := filepath.Join(dir, e.Name())
		if isGitDir(m) {
			if !n.known[m] && !n.handled[m] {
				n.harmless(root, m)
				n.handled[m] = true
			}
			m = filepath.Join(m, "modules") // its own submodules'
		}
		if !n.modules(root, modules, m) {
			return false
		}
	}
	return true
}

// plainWay reports whether p is a directory reached from root with no
// symlink on the way, nor p one: git enters no gitlink's checkout
// through a symlink.
func (n *newRepos) plainWay(root, p string) bool {
	r, ok := n.root(root)
	rel, err := filepath.Rel(root, p)
	if !ok || err != nil {
		return false
	}
	at, err := openBeneath(r, filepath.Join(rel, ".git"), false)
	if err != nil {
		return false
	}
	at.close()
	return true
}

// harmless moves aside what git runs code from in git dir g.
func (n *newRepos) harmless(root, g string) {
	for _, name := range gitDirFiles {
		n.moveAside(root, filepath.Join(g, name), true)
	}
}

// moveAside moves p aside, reached from root one directory at a time,
// never through a symlink; nothing there is nothing to do. gentle: what a
// new repository keeps working without (its config, its hooks).
func (n *newRepos) moveAside(root, p string, gentle bool) {
	r, ok := n.root(root)
	rel, err := filepath.Rel(root, p)
	if !ok || err != nil {
		return
	}
	at, err := openBeneath(r, rel, false)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	to := ""
	if err == nil {
		defer at.close()
		if _, err = at.dir.Lstat(at.name); errors.Is(err, fs.ErrNotExist) {
			return
		}
		if err == nil {
			to, err = moveAsideAs(at.dir, at.name)
		}
	}
	if err != nil {
		n.errs = append(n.errs, fmt.Errorf("moving aside %q: %w", p, err))
		return
	}
	n.reverted = append(n.reverted, p)
	n.moved = append(n.moved, movedPath{from: p, to: filepath.Join(filepath.Dir(p), to), gentle: gentle})
}

// movedPath is one path a pass moved aside.
type movedPath struct {
	from, to string
	gentle   bool
}

// sweptRepos is what the sweeps of a running task made harmless, to tell
// a task that undoes it.
type sweptRepos struct {
	moved []string       // where they went
	times map[string]int // passes that moved each path
}

// replanted reports whether this pass, a sweep's, undid a task's undoing:
// what an earlier sweep moved aside is gone (renamed back, say), or a
// path was moved aside again. A new repository's config or hooks moved
// aside in three sweeps count, not in two: a git clone or submodule
// update writes its config again when it is done.
func (s *sweptRepos) replanted(moved []movedPath) bool {
	again := false
	for _, p := range s.moved {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			again = true
		}
	}
	for _, m := range moved {
		s.times[m.from]++
		if n := s.times[m.from]; n >= 3 || n >= 2 && !m.gentle {
			again = true
		}
		s.moved = append(s.moved, m.to)
	}
	return again
}
