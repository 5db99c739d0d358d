package main

// Sessions' workspaces: a call's workspace and working directory,
// resolved from its session. A session's workspace is pinned by its first
// call (device and inode): a command that renames the workspace away and
// puts a symlink in its place cannot make the next call's writable set
// somewhere else. The state dir also lists every pinned workspace, so
// that a command that can write where another session's lies (/tmp)
// cannot plant code in its repositories (gitguard.go).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// workspacePin is what a session's first call recorded of its workspace.
type workspacePin struct {
	Given string `json:"given"` // the session cwd as the host sent it
	Path  string `json:"path"`  // canonical
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
}

// pinWorkspace records the session's workspace at its first call with a
// given cwd, and refuses a later call whose cwd now resolves to another
// directory. Calls without a session have nothing to pin against.
func (inv *invocation) pinWorkspace(sessionID, given, canonical string) error {
	if sessionID == "" {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Stat(canonical, &st); err != nil {
		return toolErrorf("bad session cwd %q: %v", given, err)
	}
	now := workspacePin{Given: given, Path: canonical, Dev: uint64(st.Dev), Ino: uint64(st.Ino)}
	dir, err := inv.ensureSessionDir(ownerKey(sessionID))
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(given))
	p := filepath.Join(dir, "workspaces", hex.EncodeToString(sum[:16])+".json")
	var was workspacePin
	switch err := readJSON(p, &was); {
	case errors.Is(err, fs.ErrNotExist):
		// Listed first: a pin the list lacks would leave its workspace
		// out of other sessions' protection; one listed in vain costs
		// nothing.
		if err := inv.listWorkspace(canonical); err != nil {
			return fmt.Errorf("listing the session's workspace: %w", err)
		}
		return writeJSON(p, &now)
	case err != nil:
		return fmt.Errorf("reading the session's workspace pin: %w", err)
	case was.Path != now.Path || was.Dev != now.Dev || was.Ino != now.Ino:
		return toolErrorf("refusing the session cwd %q: it now resolves to %q (device %d, inode %d), but this session's first call pinned it at %q (device %d, inode %d); the directory was replaced since. Use a new session for a new directory", given, now.Path, now.Dev, now.Ino, was.Path, was.Dev, was.Ino)
	}
	return nil
}

// pinSession pins the workspace of a session that names a cwd. A full
// state dir cannot take a new session's pin; the pin guards what a
// confined command may write, so a call that may go without (unconfined,
// in the foreground) runs, and the session's next call pins.
func (inv *invocation) pinSession(s *session, workspace string, mayGoWithout bool) error {
	if s.CWD == "" {
		return nil
	}
	err := inv.pinWorkspace(s.ID, s.CWD, workspace)
	switch {
	case err == nil || !diskFull(err):
		return err
	case mayGoWithout:
		return nil
	}
	return fmt.Errorf("the state dir is full, and this call needs the session's workspace recorded in it (an unconfined foreground call runs without): %w", err)
}

// diskFull says err is a full disk or quota.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// maxOtherWorkspaces bounds the other sessions' workspaces a call
// protects: the most recently pinned.
const maxOtherWorkspaces = 256

// otherWorkspaces lists the workspaces other sessions pinned that lie in
// writable, or whose .git points away (pointsAway: a worktree of a
// repository in /tmp), the latest maxOtherWorkspaces of them, so that a
// command that can write where they or their git dirs lie (/tmp) cannot
// plant code in their repositories either.
func (inv *invocation) otherWorkspaces(mine string, writable []string) []string {
	var out []string
	looked := 0 // at workspaces outside the writable directories: a Lstat each
	for _, p := range inv.listedWorkspaces() {
		if len(out) == maxOtherWorkspaces {
			break
		}
		switch {
		case p == mine:
		case containing(p, writable) != "":
			out = append(out, p)
		case looked < maxOtherWorkspaces:
			if looked++; pointsAway(p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// pointsAway reports whether workspace p's .git is a file or a symlink:
// a linked worktree's or a submodule's, whose git dir can lie in a
// writable directory though p does not (a worktree of a repository in
// /tmp), and is protected from there.
func pointsAway(p string) bool {
	fi, err := os.Lstat(filepath.Join(p, ".git"))
	return err == nil && (fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0)
}

// listedWorkspaces is every workspace a session pinned, newest first,
// each once. They are read from the state dir's list of them, one file,
// rather than from every session's pin: that cost a file per session on
// every confined call. A list that cannot be read (a command of the
// snapshot mechanism can chmod it; openOwn puts the mode back) gives way
// to the pins themselves.
func (inv *invocation) listedWorkspaces() []string {
	data, err := readPrivate(inv.workspaceList())
	if errors.Is(err, fs.ErrNotExist) {
		data, err = inv.buildWorkspaceList()
	}
	if err != nil && data == nil {
		data = inv.workspacesFromPins() // fail closed: the pins themselves
	}
	paths := decodePaths(data)
	slices.Reverse(paths)
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// writtenList is the state dir's list of every path a confined call made
// writable (workspace-write's workspace, /tmp, the build cache,
// writable_roots), made before its command starts: no shell is run from
// inside one (checkShell), whichever session's call asks.
func (inv *invocation) writtenList() string { return filepath.Join(inv.stateDir, "written") }

// writtenPaths reads writtenList. One that cannot be read refuses the
// call: it is all that keeps a shell planted by another session's command
// from running unconfined.
func (inv *invocation) writtenPaths() ([]string, error) {
	data, err := readPrivate(inv.writtenList())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the list of the paths confined calls wrote: %w", err)
	}
	return decodePaths(data), nil
}

// noteWritten adds to writtenList the paths of writable that listed, its
// contents, lacks.
func (inv *invocation) noteWritten(listed, writable []string) error {
	var add []string
	for _, p := range writable {
		if !slices.Contains(listed, p) && !slices.Contains(add, p) {
			add = append(add, p)
		}
	}
	if add == nil {
		return nil
	}
	unlock, err := lockFile(inv.writtenList() + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	return appendPaths(inv.writtenList(), add)
}

func (inv *invocation) workspaceList() string { return filepath.Join(inv.stateDir, "workspaces") }

// listWorkspace adds a newly pinned workspace to the state dir's list.
func (inv *invocation) listWorkspace(canonical string) error {
	unlock, err := lockFile(inv.workspaceList() + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := inv.buildWorkspaceListLocked(); err != nil {
		return err
	}
	return appendPaths(inv.workspaceList(), []string{canonical})
}

// decodePaths are the absolute paths of a list of the state dir (a JSON
// string a line), in order; a line being written meanwhile does not
// decode, and is skipped.
func decodePaths(data []byte) []string {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		var p string
		if json.Unmarshal([]byte(line), &p) == nil && filepath.IsAbs(p) {
			out = append(out, p)
		}
	}
	return out
}

// appendPaths appends paths to the list at p, a line each, the first on a
// line of its own after a torn one; the caller holds the list's lock.
func appendPaths(p string, paths []string) error {
	f, err := openOwn(p, os.O_RDWR|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return err
	}
	var b []byte
	last := []byte{'\n'}
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		f.ReadAt(last, fi.Size()-1)
	}
	if last[0] != '\n' {
		b = append(b, '\n')
	}
	for _, q := range paths {
		line, _ := json.Marshal(q)
		b = append(append(b, line...), '\n')
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// buildWorkspaceList makes the list from the sessions' pins where there
// is none yet (a state dir of a release before it), under its lock.
func (inv *invocation) buildWorkspaceList() ([]byte, error) {
	unlock, err := lockFile(inv.workspaceList() + ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	return inv.buildWorkspaceListLocked()
}

// buildWorkspaceListLocked returns the list, made from the pins if it
// does not exist; the caller holds its lock.
func (inv *invocation) buildWorkspaceListLocked() ([]byte, error) {
	if data, err := readPrivate(inv.workspaceList()); !errors.Is(err, fs.ErrNotExist) {
		return data, err
	}
	b := inv.workspacesFromPins()
	return b, writeFileAtomic(inv.workspaceList(), b)
}

// readPrivate reads a file of the state dir (openOwn).
func readPrivate(p string) ([]byte, error) {
	f, err := openOwn(p, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// workspacesFromPins is the list made from the sessions' pins.
func (inv *invocation) workspacesFromPins() []byte {
	pins, _ := filepath.Glob(filepath.Join(inv.stateDir, "sessions", "*", "workspaces", "*.json"))
	var b []byte
	for _, p := range pins {
		var pin workspacePin
		if readJSON(p, &pin) == nil && filepath.IsAbs(pin.Path) {
			line, _ := json.Marshal(pin.Path)
			b = append(append(b, line...), '\n')
		}
	}
	return b
}

// resolveDirs canonicalises the session workspace and the workdir: an
// absolute workdir as given, a relative one against the workspace.
func (inv *invocation) resolveDirs(s *session, workdir string) (workspace, dir string, err error) {
	switch {
	case s.CWD != "":
		if workspace, err = canonicalDir(s.CWD); err != nil {
			return "", "", toolErrorf("bad session cwd %q: %v", s.CWD, err)
		}
	case inv.cfg.Workspace != "":
		if workspace, err = canonicalDir(inv.cfg.Workspace); err != nil {
			return "", "", toolErrorf("bad workspace %q: %v", inv.cfg.Workspace, err)
		}
	default:
		cwd, err := os.Getwd()
		if err == nil {
			workspace, err = canonicalDir(cwd)
		}
		if err != nil {
			return "", "", toolErrorf("bad workspace (the current directory): %v", err)
		}
	}
	if workdir == "" {
		return workspace, workspace, nil
	}
	if !filepath.IsAbs(workdir) {
		workdir = filepath.Join(workspace, workdir)
	}
	if dir, err = canonicalDir(workdir); err != nil {
		return "", "", toolErrorf("bad workdir %q: %v", workdir, err)
	}
	return workspace, dir, nil
}

// canonicalDir resolves p to an absolute path without symlinks that names
// an existing directory.
func canonicalDir(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", errors.New("not an absolute path")
	}
	c, err := filepath.EvalSymlinks(p)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", err
	}
	fi, err := os.Stat(c)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", errors.New("not a directory")
	}
	// A directory bashcall's user cannot enter would fail the command's
	// start with a bare "permission denied" that names no path.
	if err := syscall.Access(c, unix.X_OK); err != nil {
		return "", err
	}
	return c, nil
}
