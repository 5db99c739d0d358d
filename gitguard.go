package main

// Planted code (PROTOCOL.md section 7): a confined command must not change
// what git runs later, unconfined, for the person or the host. git runs
// code named by a repository's hooks and config (core.fsmonitor,
// core.hooksPath, core.sshCommand, filter and diff drivers, ! aliases), so
// those files are protected in every repository whose git dir lies in a
// writable directory: .git/hooks/, .git/config, .git/config.worktree and
// .git/commondir (which would point git at another config), the same files
// of submodules (.git/modules/**) and linked worktrees (.git/worktrees/*),
// and a .git file that points at the git dir.
//
// Two mechanisms. Where the launcher has a private mount namespace, the
// existing paths are bound read-only and every git dir is bound onto
// itself, so that it cannot be renamed away and replaced. Elsewhere
// bashcall snapshots the paths before the call and restores them after
// it. Either way, a protected path that did not exist before the call and
// exists after it is removed. Everything else in .git (index, objects,
// refs, logs) stays writable, so git add, commit, checkout and stash work.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Limits on what one call's protection looks at.
const (
	maxGuardEntries = 2000
	maxGuardBytes   = 4 << 20
	maxSubmodules   = 512  // of one .gitmodules
	maxResolveSteps = 4096 // names walked resolving one top's submodule paths (its own workspace's: 4 times more)
	// Bytes of the protected and pinned paths the launcher gets as
	// arguments: of one top, and of all but the call's workspace.
	maxGuardPathBytes = 256 << 10
	maxCallPathBytes  = 1 << 20
)

// guardEntry is one protected path as it was before the call.
type guardEntry struct {
	Root string      `json:"root"` // the writable directory it lies in
	Rel  string      `json:"rel"`  // its path inside Root
	Kind string      `json:"kind"` // "absent", "file", "dir", "symlink", "other"
	Mode fs.FileMode `json:"mode,omitempty"`
	Data []byte      `json:"data,omitempty"` // a file's content, a symlink's target
	// Names of a directory's entries, so that added ones are removed.
	Names []string `json:"names,omitempty"`
	// Full says Data and Names were recorded (the snapshot mechanism).
	Full bool `json:"full,omitempty"`
	// Shallow marks a git dir itself: restored only to be a directory
	// again (a command could swap it for a .git file pointing elsewhere).
	Shallow bool `json:"shallow,omitempty"`
	// Remake: a repository's own git dir (its .git directory, or where a
	// .git symlink leads), made again if it is gone, for its recorded
	// files: moved away in one call, it could come back planted in the
	// next, and nothing else points at it.
	Remake bool `json:"remake,omitempty"`
}

// modeEntry is the mode of a control path (or an ancestor of one) that
// the snapshot mechanism puts back: without a mount namespace a command
// can chmod what its user owns, bashcall's executable and state dir
// included, and so make the next call fail.
type modeEntry struct {
	Path string      `json:"path"`
	Mode fs.FileMode `json:"mode"`
}

// path is the entry's absolute path.
func (g *guardEntry) path() string { return filepath.Join(g.Root, g.Rel) }

// gitGuard is the protection of one call.
type gitGuard struct {
	Entries []guardEntry `json:"entries,omitempty"`
	// Pins are git dirs bound onto themselves in a mount namespace.
	Pins []string `json:"pins,omitempty"`
	// Modes are control paths' modes, put back after the call (snapshot).
	Modes []modeEntry `json:"modes,omitempty"`
	// Found are the submodule checkouts of the call's workspace, for the
	// next calls (rememberedTops).
	Found []string `json:"-"`
	// Known are the git dirs found before the call, and Watch the places
	// looked at for repositories the call made (gitnew.go).
	Known []string    `json:"known,omitempty"`
	Watch []repoWatch `json:"watch,omitempty"`
}

// readOnly lists the existing protected paths, for the launcher to bind.
func (g *gitGuard) readOnly() []string {
	var out []string
	for _, e := range g.Entries {
		if (e.Kind == "file" || e.Kind == "dir") && !e.Shallow {
			out = append(out, e.path())
		}
	}
	return out
}

// planGitGuard records the protected paths of every repository whose git
// dir lies in one of writable (the first is the call's workspace): at the
// top of each writable directory, of each of others (other sessions'
// workspaces, which a command of this one could reach through /tmp), and
// of the submodules .gitmodules names in those. full records contents for
// a restore (the snapshot mechanism), and the modes of controls and their
// ancestors; without it only what exists is noted.
func planGitGuard(writable, others, remembered, controls []string, full bool) (*gitGuard, error) {
	g := &gitGuard{}
	// done holds the tops scanned and the paths recorded, never what a
	// spent budget skipped: another top's budget can still pay for those.
	done := map[string]bool{}
	own := ""
	if len(writable) > 0 {
		own = writable[0]
	}
	type scanTop struct {
		dir    string
		budget *guardBudget // its writable directory's, or the session's it belongs to
	}
	var tops []scanTop
	starts := append(append([]string(nil), writable...), others...)
	// elsewhere reports whether p lies in a starting place other than
	// start, a directory every session writes (/tmp, a writable root),
	// and not around it. A pointer (a .git file or symlink, a commondir,
	// a .gitmodules path) from such a place, which any session's command
	// can plant, into another place (a session's workspace, private or
	// not) must not have that place's files bound or reverted: its own
	// scan protects its repositories. (A session's workspace may point
	// elsewhere: a linked worktree's git dir is in its main repository.)
	shared := map[string]bool{}
	for _, d := range writable[min(1, len(writable)):] {
		shared[d] = true
	}
	elsewhere := func(p, start string) bool {
		if !shared[start] {
			return false
		}
		for _, d := range starts {
			if d != start && within(p, d) && !within(start, d) {
				return true
			}
		}
		return false
	}
	callBytes := 0
	for _, d := range starts {
		steps := maxResolveSteps
		if d == own {
			steps = 4 * maxResolveSteps
		}
		tops = append(tops, scanTop{d, &guardBudget{dir: d, own: d == own, bytes: maxGuardBytes, steps: steps, callBytes: &callBytes}})
	}
	// The directories between a workspace and the writable directory it
	// lies in (a workspace in /tmp/x/ws): git run in the workspace goes
	// up through them when it is no repository, to the first that holds
	// a .git or is a git dir itself. Charged to that writable directory,
	// which every session's command can fill.
	for i, ws := range starts {
		if i > 0 && i < len(writable) {
			continue // a writable directory, not a workspace
		}
		root := containing(ws, writable[min(1, len(writable)):]) // not its own
		if i > 0 {
			root = containing(ws, writable)
		}
		if root == "" || root == ws {
			continue
		}
		var rb *guardBudget
		for _, t := range tops {
			if t.dir == root {
				rb = t.budget
			}
		}
		for p := filepath.Dir(ws); p != root && within(p, root) && rb != nil; p = filepath.Dir(p) {
			tops = append(tops, scanTop{p, rb})
		}
	}
	// The workspace's submodule checkouts that earlier calls found, if
	// its .gitmodules no longer names them (rememberedTops).
	for _, r := range remembered {
		// Where the path leads now: a checkout replaced by a symlink (git
		// rm lib; ln -s ../other lib) is no checkout any more.
		if c, err := kernelPath(r); err == nil && c != r || errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if own != "" && within(r, own) && r != own {
			tops = append(tops, scanTop{r, tops[0].budget})
		}
	}
	isOther := map[string]bool{}
	for _, d := range others {
		isOther[d] = true
	}
	for i := 0; i < len(tops); i++ {
		top, b := tops[i].dir, tops[i].budget
		root := containing(top, writable)
		// Another session's workspace outside the writable directories is
		// scanned for the git dirs it points at in them (pointsAway).
		if root == "" && !(isOther[top] && b.dir == top) || done["top:"+top] {
			continue
		}
		if b.over(&b.tops) {
			if err := b.spend(); err != nil {
				return nil, err
			}
			continue
		}
		done["top:"+top] = true
		dotGit := filepath.Join(top, ".git")
		gitDirs := gitDirsOf(top)
		g.Known = append(g.Known, gitDirs...)
		shaped := gitShaped(top)
		if root != "" {
			g.Watch = append(g.Watch, repoWatch{Root: root, Top: top, Shaped: shaped, Own: b.own})
		}
		fi, err := os.Lstat(dotGit)
		// The top's own git dir: its .git, or where a .git symlink leads
		// (a .git file's is pointed at by that file, and protected by it).
		ownGitDir := err == nil && !fi.Mode().IsRegular()
		if err == nil && (fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0) {
			// A .git file or symlink is protected whatever it names (a
			// symlink is put back after the call), so that it cannot be
			// pointed at a forged git dir.
			gitDirs = append([]string{""}, gitDirs...)
		}
		if b.own && top != own && err == nil {
			g.Found = append(g.Found, top) // a checkout, for the next calls
		}
		if p := pointedAt(top); p != "" {
			gitDirs = append(gitDirs, "weak:"+p)
		}
		if shaped {
			// The top is a git dir itself (a bare repository): its files
			// as they are, as a .git file's that names no git dir.
			g.Known = append(g.Known, top)
			gitDirs = append(gitDirs, "weak:"+top)
		}
		// First the files of every git dir the top names (config, hooks,
		// ...: of a worktree's own git dir and of its common dir), then
		// their worktrees and modules, which a command can fill to spend
		// a budget that does not refuse.
		var first, then []guardPath
		incomplete := map[string]bool{}
		for _, gitDir := range gitDirs {
			weakDir, weak := strings.CutPrefix(gitDir, "weak:")
			if gitDir != "" && elsewhere(weakDir, b.dir) {
				continue
			}
			switch {
			case gitDir == "":
				for _, p := range append([]string{dotGit}, pointerLinks(top)...) {
					first = append(first, guardPath{p: p})
				}
			case weak: // not a git dir (yet): its files as they are, no hooks/ made
				for _, n := range gitDirFiles {
					// What git could take for its own: a hooks directory,
					// the other three files, or nothing yet; not a
					// project's config/ directory.
					fi, err := os.Lstat(filepath.Join(weakDir, n))
					if err == nil && fi.IsDir() != (n == "hooks") {
						continue
					}
					first = append(first, guardPath{p: filepath.Join(weakDir, n), weak: true})
				}
			default:
				if full {
					first = append(first, guardPath{p: gitDir, gitDir: gitDir, shallow: true})
				}
				more, found, complete := protectedGitPaths(gitDir)
				g.Known = append(g.Known, found...)
				incomplete[gitDir] = !complete
				head := min(len(more), len(gitDirFiles))
				for i, p := range more {
					gp := guardPath{p: p, gitDir: gitDir}
					if i < head {
						first = append(first, gp)
					} else {
						then = append(then, gp)
					}
				}
			}
		}
		for _, gp := range append(first, then...) {
			if err := g.protectPath(gp, writable, b, ownGitDir, full, done, elsewhere); err != nil {
				return nil, err
			}
		}
		for _, gitDir := range gitDirs {
			if gitDir == "" || strings.HasPrefix(gitDir, "weak:") || elsewhere(gitDir, b.dir) {
				continue
			}
			gb := b.outside(gitDir)
			if incomplete[gitDir] { // more than a budget: what was listed is protected, and no more
				if err := gb.spend(); err != nil {
					return nil, err
				}
			}
			if root := containing(gitDir, writable); root != "" {
				if err := g.pinUp(gitDir, root, gb, done); err != nil {
					return nil, err
				}
			}
		}
		// The submodules after the top's own git files, which the
		// resolving of what a .gitmodules names must not leave unpaid.
		subs, complete := submodulePaths(top)
		if complete {
			subs, complete = withGitlinks(subs, top, gitDirs, b.own)
		}
		if !complete { // more than a .gitmodules holds: those listed are protected, and no more
			if b.own {
				return nil, b.spend()
			}
			b.warn()
		}
		for _, sub := range subs {
			// Canonical, as every path the launcher binds must be: it
			// refuses a symlink on the way (a .gitmodules path can lead
			// through one), and where the path leads is what git reaches.
			// The directory that named it pays for it.
			c, ok := resolveSubmodule(filepath.Join(top, sub), &b.steps)
			if c == "" && ok {
				continue // nothing there for git to reach
			}
			if !ok {
				if err := b.spend(); err != nil {
					return nil, err
				}
				break
			}
			if !done["top:"+c] && !elsewhere(c, b.dir) {
				tops = append(tops, scanTop{c, b.outside(c)})
			}
		}
		if b.spent || b.reach != nil && b.reach.spent {
			delete(done, "top:"+top) // what it skipped, another budget may pay for
		}
	}
	sort.Slice(g.Pins, func(i, j int) bool { // shorter first
		return len(g.Pins[i]) < len(g.Pins[j]) || len(g.Pins[i]) == len(g.Pins[j]) && g.Pins[i] < g.Pins[j]
	})
	if full {
		g.Modes = controlModes(controls)
	}
	return g, nil
}

// guardPath is one path the scan of a top protects.
type guardPath struct {
	p       string
	gitDir  string // the git dir it lies in, whose way is pinned; "" for a .git file, a link, a weak path
	shallow bool   // the git dir itself (recordShallow)
	weak    bool   // what a .git file names that is no git dir: as it is, no hooks/ made
}

// protectPath records gp, found from a top of budget b, charged to the
// budget of where it lies (outside), with the directories on the way to
// it inside its git dir pinned.
func (g *gitGuard) protectPath(gp guardPath, writable []string, b *guardBudget, ownGitDir, full bool, done map[string]bool, elsewhere func(p, start string) bool) error {
	key := fmt.Sprint(gp.shallow, gp.p)
	proot := containing(gp.p, writable)
	if proot == "" || done[key] || elsewhere(gp.p, b.dir) { // a core.worktree can name any place
		return nil
	}
	pb := b.outside(gp.p)
	if pb.over(&pb.entries) || pb.overPath(gp.p) {
		return pb.spend()
	}
	var err error
	if gp.shallow {
		err = g.recordShallow(proot, gp.p, ownGitDir)
	} else {
		err = g.record(proot, gp.p, full, !gp.weak, pb)
	}
	switch {
	case errors.Is(err, errGuardFull):
		return pb.spend()
	case err == nil:
		done[key] = true
		if gp.gitDir != "" && within(gp.p, gp.gitDir) {
			// The directories on the way to it (worktrees/<name>,
			// modules/...) and to its git dir.
			return g.pinUp(filepath.Dir(gp.p), proot, pb, done)
		}
		return nil
	case !pb.own:
		// A path of another place that cannot be read (any session's
		// command can chmod /tmp/.git 000) must not refuse every
		// session's calls.
		warnf("bashcall: cannot protect %q: %v", gp.p, err)
		return nil
	}
	return err
}
