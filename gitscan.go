package main

// Finding what the git protection (gitguard.go) protects: the git dirs
// of a directory, the submodules and worktrees of a git dir, read off
// files any session's command may have shaped (gitrestore.go's readSmall
// reads them).

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// submodulePaths reads the submodule paths of .gitmodules at top: each
// has a .git file (or dir) of its own that git follows.
func submodulePaths(top string) (out []string, complete bool) {
	b, err := readSmall(filepath.Join(top, ".gitmodules"), 1<<20)
	if err != nil {
		return nil, !errors.Is(err, errTooLarge)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "path") { // git's keys know no case
			continue
		}
		v = filepath.Clean(unquote(strings.TrimSpace(v)))
		if v != "." && !filepath.IsAbs(v) && !strings.HasPrefix(v, "..") && !seen[v] {
			if len(out) == maxSubmodules {
				return out, false
			}
			seen[v] = true
			out = append(out, v)
		}
	}
	return out, true
}

// gitDirsOf finds the git dirs of the repository at dir: its .git
// directory, or the one a .git file or symlink points at, with the common
// dir of a linked worktree.
func gitDirsOf(dir string) []string {
	dotGit := filepath.Join(dir, ".git")
	fi, err := os.Lstat(dotGit)
	if err != nil {
		return nil
	}
	var gitDir string
	switch {
	case fi.IsDir():
		return []string{dotGit}
	case fi.Mode()&fs.ModeSymlink != 0: // git follows it
		c, err := filepath.EvalSymlinks(dotGit)
		if err != nil || !isGitDir(c) {
			return nil
		}
		gitDir = c
	case fi.Mode().IsRegular():
		var ok bool
		if gitDir, ok = readGitFile(dotGit, "gitdir: "); !ok || !isGitDir(gitDir) {
			return nil
		}
	default:
		return nil
	}
	out := []string{gitDir}
	if common, ok := readGitFile(filepath.Join(gitDir, "commondir"), ""); ok && isGitDir(common) {
		out = append(out, common)
	}
	return out
}

// pointerLinks lists the symlinks, but .git itself, on the way from dir's
// .git file or symlink to its git dir, and from that git dir to the one
// its commondir names: swapping one of them for a forged git dir
// repoints the repository as surely as rewriting the .git file would.
func pointerLinks(dir string) []string {
	dotGit := filepath.Join(dir, ".git")
	var gitDir string
	if fi, err := os.Lstat(dotGit); err != nil {
		return nil
	} else if fi.Mode()&fs.ModeSymlink != 0 {
		gitDir = dotGit
	} else if line, ok := readPointer(dotGit, "gitdir: "); ok {
		gitDir = line
	} else {
		return nil
	}
	var links []string
	for _, l := range linksOnWay(gitDir) {
		if l != dotGit {
			links = append(links, l)
		}
	}
	if c, err := filepath.EvalSymlinks(gitDir); err == nil {
		if common, ok := readPointer(filepath.Join(c, "commondir"), ""); ok {
			links = append(links, linksOnWay(common)...)
		}
	}
	return links
}

// coreWorktree is core.worktree in git dir g's config (as git submodule
// writes it for a submodule's git dir under .git/modules), canonical, or
// "".
func coreWorktree(g string) string {
	for _, v := range gitConfigValues(g, "core", "worktree") {
		if !filepath.IsAbs(v) {
			v = filepath.Join(g, v)
		}
		if c, err := filepath.EvalSymlinks(v); err == nil {
			return c
		}
	}
	return ""
}

// gitConfigValues are key's values in section of git dir g's config (a
// plain reading: no includes, no subsections).
func gitConfigValues(g, section, key string) (values []string) {
	b, err := readSmall(filepath.Join(g, "config"), 1<<16)
	if err != nil {
		return nil
	}
	in := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			in = strings.ToLower(strings.Trim(line, "[] \t"))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && in == section && strings.EqualFold(strings.TrimSpace(k), key) {
			values = append(values, unquote(strings.TrimSpace(v)))
		}
	}
	return values
}

// unquote is a git config or .gitmodules value without its double quotes.
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// isGitDir reports whether dir is a git dir: it holds HEAD, or a config
// (a command can remove HEAD, which nothing protects, to have the next
// call's scan pass over the git dir, and then put it back with a planted
// config; the config itself is protected).
func isGitDir(dir string) bool {
	if fi, err := os.Lstat(filepath.Join(dir, "HEAD")); err == nil && !fi.IsDir() {
		return true
	}
	// A config file, not a project's config/ directory.
	fi, err := os.Lstat(filepath.Join(dir, "config"))
	return err == nil && fi.Mode().IsRegular()
}

// pointedAt is what dir's .git file names when that is not a git dir (or
// nothing at all), resolved as far as it exists; else "". A command that
// took the git dir apart (removed it, with snapshots) could make it again
// with a planted config in a later call, so git's files there are
// protected as they are, absent ones removed after the call.
func pointedAt(dir string) string {
	dotGit := filepath.Join(dir, ".git")
	fi, err := os.Lstat(dotGit)
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	line, ok := readPointer(dotGit, "gitdir: ")
	if !ok {
		return ""
	}
	if g := canonicalPrefix(line); !isGitDir(g) {
		return g
	}
	return ""
}

// readGitFile reads a one-line pointer file of git's ("gitdir: PATH", or
// a commondir's bare PATH), relative to the file's directory, canonical.
func readGitFile(p, prefix string) (string, bool) {
	line, ok := readPointer(p, prefix)
	if !ok {
		return "", false
	}
	c, err := filepath.EvalSymlinks(line)
	if err != nil {
		return "", false
	}
	return c, true
}

// readPointer is readGitFile's path as written, made absolute, not
// resolved.
func readPointer(p, prefix string) (string, bool) {
	// As git reads them (setup.c): a .git file of up to PATH_MAX*4 bytes
	// (git refuses a larger one), a commondir of any size, each without
	// its trailing newlines and carriage returns, and nothing else
	// trimmed: a path with a trailing space is another path. A relative
	// one is joined to the file's directory as is, for the kernel to
	// resolve (a symlink before a "..").
	limit := 4 * 4096
	if prefix == "" {
		limit = 1 << 20
	}
	b, err := readSmall(p, limit)
	if err != nil {
		return "", false
	}
	line, ok := strings.CutPrefix(strings.TrimRight(string(b), "\r\n"), prefix)
	if !ok || line == "" {
		return "", false
	}
	if !filepath.IsAbs(line) {
		line = filepath.Dir(p) + "/" + line
	}
	return line, true
}

// gitDirFiles are what a git dir protects of its own, first in its list
// (protectedGitPaths).
var gitDirFiles = []string{"config", "config.worktree", "commondir", "hooks"}

// protectedGitPaths lists what git dir g protects, with the git dirs of
// its linked worktrees and (recursively) its submodules, and the git dirs
// it found (g and its submodules'); complete is false where a directory
// held more entries than a budget, or the list grew past one, and the
// list stopped there.
func protectedGitPaths(g string) (paths, dirs []string, complete bool) {
	complete = true
	listed := 0
	list := func(dir string) []os.DirEntry {
		// Each directory walked counts, whether or not it adds a path: a
		// tree of empty directories under modules/ costs its size.
		if listed++; listed > maxGuardEntries || len(paths) > maxGuardEntries {
			complete = false
			return nil
		}
		entries, err := readDirBounded(dir)
		if errors.Is(err, errTooLarge) {
			complete = false
			return nil
		}
		return entries
	}
	// As deep as names and submodules nest: git bounds neither (a
	// module's name may hold any number of slashes), only the listings'
	// budget does.
	var walk, walkModules func(dir string)
	walk = func(dir string) {
		dirs = append(dirs, dir)
		for _, name := range gitDirFiles {
			paths = append(paths, filepath.Join(dir, name))
		}
		if wt := coreWorktree(dir); wt != "" {
			// A submodule's checkout, found from its git dir, whatever
			// .gitmodules says now: its .git file names this git dir. A
			// .git file only: a config can name any directory, and a
			// whole repository there is not this git dir's to protect.
			if fi, err := os.Lstat(filepath.Join(wt, ".git")); err == nil && fi.Mode().IsRegular() {
				paths = append(paths, filepath.Join(wt, ".git"))
			}
		}
		for _, w := range list(filepath.Join(dir, "worktrees")) {
			if w.IsDir() {
				wd := filepath.Join(dir, "worktrees", w.Name())
				paths = append(paths, filepath.Join(wd, "config.worktree"), filepath.Join(wd, "commondir"), filepath.Join(wd, "gitdir"))
			}
		}
		walkModules(filepath.Join(dir, "modules"))
	}
	walkModules = func(modules string) {
		for _, e := range list(modules) {
			if !e.IsDir() {
				continue
			}
			d := filepath.Join(modules, e.Name())
			if isGitDir(d) {
				walk(d)
			} else {
				walkModules(d)
			}
		}
	}
	walk(g)
	return paths, dirs, complete
}

// rememberedTops are the submodule checkouts of workspace that the
// session's earlier calls found (in .gitmodules, or from core.worktree):
// a command that cut one from .gitmodules and removed its git dir in one
// call would otherwise have its .git file unprotected in the next, and
// point it at a forged git dir. A checkout is remembered as long as its
// .git exists, and its path is no symlink.
func (inv *invocation) rememberedTops(sessionID, workspace string) []string {
	f, err := openOwn(filepath.Join(inv.sessionDir(ownerKey(sessionID)), "submodules"), os.O_RDONLY)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxRecordBytes))
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if filepath.IsAbs(l) && within(l, workspace) && len(out) < maxSubmodules {
			out = append(out, l)
		}
	}
	return out
}

// rememberTops records found as the workspace's submodule checkouts, if
// they differ from those remembered.
func (inv *invocation) rememberTops(sessionID string, remembered, found []string) {
	found = slices.Compact(slices.Sorted(slices.Values(found)))
	if len(found) > maxSubmodules {
		found = found[:maxSubmodules]
	}
	if slices.Equal(found, slices.Sorted(slices.Values(remembered))) {
		return
	}
	dir, err := inv.ensureSessionDir(ownerKey(sessionID))
	if err != nil {
		return
	}
	p := filepath.Join(dir, "submodules")
	if len(found) == 0 {
		os.Remove(p)
		return
	}
	writeFileAtomic(p, []byte(strings.Join(found, "\n")+"\n"))
}

// errNoProc is /proc missing, or not saying what a descriptor names.
var errNoProc = errors.New("/proc cannot name the descriptor")

// resolveSubmodule is where git reaches the checkout at path p, which a
// .gitmodules names: canonical, as the kernel resolves it (kernelPath),
// so that a chain of symlinks however shaped costs what the kernel's own
// limits allow, not a budget a command elsewhere could spend (a
// submodule linked into /tmp). "" is nowhere git could go (nothing there,
// a loop). Where /proc cannot say, it is resolveWithin's walk, on steps,
// and ok false once they are spent.
func resolveSubmodule(p string, steps *int) (c string, ok bool) {
	c, err := kernelPath(p)
	if err == nil {
		return c, true
	}
	if !errors.Is(err, errNoProc) {
		return "", true
	}
	return resolveWithin(p, steps)
}
