package main

// bashcall's control paths (PROTOCOL.md section 7): what a confined command
// must never be able to write, replace or redirect, and the repairs
// bashcall makes where the kernel cannot prevent a change.
//
// The control paths are the state dir, the config file in use, the default
// config path and the directory that would hold it (even when nothing
// exists there yet: a command that could create it would choose the mode
// of every later call), the spool dir, the bashcall executable (the host
// runs it unconfined next) and the approval command. A call whose writable
// set would contain one of them, or lie inside one, is refused.
//
// This file also owns the other paths a call's sandbox is built from (but
// for the session's workspace, workspaces.go): the session's build cache,
// the read grant, and the shell, which must not lie where a confined
// command could have planted it.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// controlPaths lists the paths no confined command may change.
// Each is listed with the symlinks on the way to it as named (linksOnWay).
func (inv *invocation) controlPaths() []string {
	out := append(append([]string(nil), inv.protected...), inv.others...)
	for _, n := range inv.named {
		out = append(out, linksOnWay(n)...)
	}
	if def := defaultConfigPath(inv.getenv); def != "" {
		out = append(out, canonicalPrefix(def), canonicalPrefix(filepath.Dir(def)))
		out = append(out, linksOnWay(def)...)
	}
	if exe, err := os.Executable(); err == nil {
		out = append(out, canonicalPrefix(exe))
	}
	out = append(out, launchPaths(inv.launchName(), inv.getenv("PATH"))...)
	if len(inv.cfg.Approval.Command) > 0 {
		out = append(out, canonicalPrefix(inv.cfg.Approval.Command[0]))
		out = append(out, linksOnWay(inv.cfg.Approval.Command[0])...)
	}
	return out
}

// checkShell refuses a shell that a confined command could have put
// there: one inside a directory workspace-write makes writable (the
// call's workspace, /tmp, writable_roots, every session's build cache) or
// made writable for any earlier confined call, whichever session's
// (written, the state dir's list of them), in any mode, since an approved
// danger-full-access call would run it unconfined.
func (inv *invocation) checkShell(shell, workspace string, written []string) error {
	if !inv.sandboxes() {
		return nil // an executor that never confines has no confined command to fear
	}
	canon := canonicalPrefix(shell)
	dirs := []string{workspace, canonicalOr("/tmp")}
	for _, r := range inv.cfg.Sandbox.WritableRoots {
		dirs = append(dirs, canonicalOr(r))
	}
	if cache := inv.sandboxCachePath(""); cache != "" {
		dirs = append(dirs, canonicalPrefix(filepath.Dir(cache))) // every session's
	}
	dirs = append(dirs, written...)
	for _, d := range dirs {
		if within(canon, d) {
			return toolErrorf("refusing to run: the shell %q lies in %q, which confined commands can write; put a bash outside it first on PATH, or name one with the config's shell", canon, d)
		}
	}
	// A symlink on the way (a PATH entry that is a link) that a confined
	// command could point elsewhere swaps the shell as well, even while
	// an approval is awaited.
	for _, l := range linksOnWay(shell) {
		for _, d := range dirs {
			if within(l, d) {
				return toolErrorf("refusing to run: the shell %q is reached through the symlink %q in %q, which confined commands can write; put a bash outside it first on PATH, or name one with the config's shell", shell, l, d)
			}
		}
	}
	return nil
}

// readGrant is what confined commands may not read: [sandbox] deny_read,
// the state dir, bashcall's other directories (ownDirs: other state
// dirs' tasks, spool dirs with other calls' requests and responses), and
// the sessions' build caches, except the spill directory's files by
// exact path (and the session's own cache, which a writable rule grants).
func (inv *invocation) readGrant() readGrant {
	return callGrant(inv.cfg.Sandbox.DenyRead, inv.getenv, inv.stateDir, inv.others)
}

// callGrant is the read grant of a call under deny_read and the
// environment getenv, in the state dir stateDir, with others (ownDirs).
func callGrant(denyRead []string, getenv func(string) string, stateDir string, others []string) readGrant {
	own := append([]string{spoolDirOf(getenv), cacheBase(getenv)}, others...)
	return grantFor(denyReadOf(denyRead, getenv), homeDir(getenv), stateDir, own...)
}

// grantFor is the read grant of deny_read, home, the state dir and more
// of bashcall's own directories.
func grantFor(denyRead []string, home, stateDir string, own ...string) readGrant {
	return readGrant{Denied: deniedPaths(denyRead, home, append([]string{stateDir}, own...)...),
		FilesOnly: []string{filepath.Join(stateDir, "spill")}}
}

// ownDirs are bashcall's directories, besides the call's own state dir
// and spool dir, that no confined command may read or change: the
// default state dir when the call uses another (the tasks of a host that
// names none live there), and the spool dirs that serve listed in either
// (listSpool) and that are still the directories listed, whoever's calls
// those are. The default state dir counts whether or not it exists: a
// command that could create it would choose the standing modes of every
// session of a host that names none. A list that cannot be read refuses
// the call: it is all that keeps those directories from it.
func ownDirs(getenv func(string) string, stateDir string) ([]string, error) {
	lists := []string{stateDir}
	var out []string
	if def := defaultStateDir(getenv); def != "" {
		if c := canonicalPrefix(def); c != stateDir {
			out = append(out, c)
			// Its list is read only if it is a state dir of ours that
			// no one else could have written (a $XDG_STATE_HOME in a
			// shared directory is not): it is withheld either way.
			if fi, err := os.Lstat(c); err == nil && fi.IsDir() && ownedByMe(fi) && checkAncestry(def, c, true, "state dir", stateChoose) == nil {
				if fi.Mode().Perm()&0o077 == 0 {
					repairMode(c, fi) // a command closed it (chmod 000): ours again
				}
				lists = append(lists, c)
			}
		}
	}
	for _, d := range lists {
		listed, err := listedSpools(spoolList(d))
		if err != nil {
			return nil, fmt.Errorf("reading the list of spool dirs: %w", err)
		}
		for _, e := range listed {
			out = append(out, e.Path)
		}
	}
	return out, nil
}

// cacheBase is the directory of every session's build cache
// (sandboxCache), "" without a home.
func cacheBase(getenv func(string) string) string {
	base := xdgBase(getenv, "XDG_CACHE_HOME", ".cache")
	if !filepath.IsAbs(base) {
		return ""
	}
	return filepath.Join(base, "bashcall")
}

// spoolDirOf is the spool dir serve runs this process's call for, or "".
func spoolDirOf(getenv func(string) string) string {
	if spool := getenv("BASHCALL_SPOOL_DIR"); spool != "" {
		return canonicalOr(spool)
	}
	return ""
}

// denyReadOf is deny_read with each "~" entry also under the user's home
// in /etc/passwd where $HOME names another: the keys ssh and git use are
// there, whatever a host set $HOME to.
func denyReadOf(denyRead []string, getenv func(string) string) []string {
	home, own := homeDir(getenv), ownHome()
	if !filepath.IsAbs(own) || filepath.Clean(own) == filepath.Clean(home) {
		return denyRead
	}
	out := slices.Clip(denyRead)
	for _, p := range denyRead {
		switch {
		case p == "~":
			out = append(out, own)
		case strings.HasPrefix(p, "~/"):
			out = append(out, filepath.Join(own, p[2:]))
		}
	}
	return out
}

// homeDir is $HOME in getenv if it is an absolute path, else the home of
// the user bashcall runs as (a relative one would have "~" in deny_read
// name a path relative to wherever a command runs).
func homeDir(getenv func(string) string) string {
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return h
	}
	if h := ownHome(); filepath.IsAbs(h) {
		return h
	}
	return ""
}

// ownHome is the home of the user bashcall runs as in /etc/passwd, read
// once: each confined call asks for it.
var ownHome = sync.OnceValue(func() string { return passwdHome(os.Getuid()) })

// passwdHome is the home directory of uid in /etc/passwd, "" when it is
// not there. (os/user would link bashcall against the C library wherever
// cgo is available, and bashcall is a static binary.)
func passwdHome(uid int) string {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 7 && f[2] == strconv.Itoa(uid) {
			return f[5]
		}
	}
	return ""
}

// canonicalPrefix is the canonical path of p, or the one p will have once
// it exists, as the kernel resolves it (realpath -m), so that a path not
// there yet is still compared by where it would be created: each symlink
// on the way is followed, a dangling one too, and ".." is taken after the
// symlink before it. What does not exist, or cannot be looked at, is kept
// as named; a relative p is taken from the working directory.
func canonicalPrefix(p string) string {
	c, _ := resolveWithin(p, nil)
	return c
}

// resolveWithin is canonicalPrefix spending one of *steps (unless steps is
// nil) on each name it walks, and giving up, false, once they run out: a
// path a command shaped (a symlink to a chain of directories thousands
// deep) costs its depth to resolve.
func resolveWithin(p string, steps *int) (string, bool) {
	return resolveLinks(p, steps, nil)
}

// openOwn opens a file of the state dir (never through a symlink). One of
// bashcall's own that a command made unreadable or unwritable (Landlock
// does not govern chmod) gets its private mode back and is opened again,
// rather than failing every later call that needs it.
func openOwn(p string, flag int) (*os.File, error) {
	flag |= syscall.O_NOFOLLOW | syscall.O_NONBLOCK // a FIFO put there must not hang the open
	f, err := os.OpenFile(p, flag, 0o600)
	if errors.Is(err, fs.ErrPermission) {
		if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode().IsRegular() {
			repairMode(p, fi)
			f, err = os.OpenFile(p, flag, 0o600)
		}
	}
	if err != nil {
		return nil, err
	}
	return keepRegular(f, p)
}

// keepRegular returns f, opened as p, if it is a regular file, and closes
// it otherwise.
func keepRegular(f *os.File, p string) (*os.File, error) {
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%q is not a regular file", p)
	}
	return f, nil
}

// repairMode gives a directory or file of bashcall's own back its private
// mode when a command changed it (Landlock does not govern chmod), saying
// so on stderr. Something owned by another user is left alone: the
// caller's check refuses it.
func repairMode(p string, fi fs.FileInfo) fs.FileInfo {
	want := fs.FileMode(0o600)
	if fi.IsDir() {
		want = 0o700
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() || fi.Mode()&fs.ModeSymlink != 0 || fi.Mode().Perm() == want {
		return fi
	}
	if err := os.Chmod(p, want); err != nil {
		return fi
	}
	warnf("bashcall: restored mode %04o of %q (it was %04o)", want, p, fi.Mode().Perm())
	if again, err := os.Lstat(p); err == nil {
		return again
	}
	return fi
}

// warnf reports a repair on bashcall's stderr.
var warnf = func(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// repairTree restores the private modes of everything of bashcall's own
// under dir (repairMode on each entry, symlinks untouched), after a
// change was seen: a command that can chmod one file can chmod them all.
func repairTree(dir string) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return
	}
	if fi = repairMode(dir, fi); !fi.IsDir() {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		repairTree(filepath.Join(dir, e.Name()))
	}
}

// sandboxCache is a private cache directory for a session's commands in
// workspace-write mode ($XDG_CACHE_HOME/bashcall/<session>): build tools
// that cache under $XDG_CACHE_HOME (go build, pip, ...) get somewhere to
// write without the user's real caches becoming writable. "" when there
// is no cache home.
func (inv *invocation) sandboxCache(sessionID string) string {
	dir := inv.sandboxCachePath(sessionID)
	if dir == "" {
		return ""
	}
	base := filepath.Dir(filepath.Dir(dir))
	// A writable workspace above the cache could have made a component a
	// symlink to somewhere else: MkdirAll would follow it, so the check
	// comes first, and again after, and then there is no private cache.
	if canonicalPrefix(dir) != filepath.Join(canonicalPrefix(base), "bashcall", filepath.Base(dir)) {
		return ""
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	canon := canonicalOr(dir)
	if canon != filepath.Join(canonicalOr(base), "bashcall", filepath.Base(dir)) {
		return ""
	}
	return canon
}

// sandboxCachePath is where a session's build cache goes,
// $XDG_CACHE_HOME/bashcall/<hash> (or under ~/.cache); "" without a home.
func (inv *invocation) sandboxCachePath(sessionID string) string {
	base := cacheBase(inv.getenv)
	if base == "" { // none, or a relative $HOME
		return ""
	}
	return filepath.Join(base, sessionCacheKey(sessionID))
}

// sessionCacheKey names a session's build cache.
func sessionCacheKey(sessionID string) string {
	if sessionID == "" {
		return "default"
	}
	sum := sha256.Sum256([]byte("bashcall-cache\x00" + sessionID))
	return hex.EncodeToString(sum[:8])
}
