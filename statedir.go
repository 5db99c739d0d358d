package main

// The state dir: private (0700, ours) or refused, and its layout, owned
// here. Everything bashcall keeps between invocations lives in it.
//
//	spill/, spill.lock            complete copies of foreground output (spill.go)
//	calls/                        live foreground calls' trees (calls.go)
//	lock, next-id                 the id counter, taken under an flock
//	tasks/bash-N/task.json        what was started, by whom (an owner key)
//	tasks/bash-N/supervisor.json  the supervisor's pid, start time and boot
//	tasks/bash-N/command.json     the command's tree (leftovers.go): written
//	                              before the command exists, then with its
//	                              leader's pid and start time
//	tasks/bash-N/{stdout,stderr}.log   complete copies, up to max_spill_bytes
//	tasks/bash-N/{stdout,stderr}.tail  bounded tails (see taskio.go)
//	tasks/bash-N/cursor, lock     read cursors, under a per-task flock
//	tasks/bash-N/kill             bash_kill asked for this task to stop
//	tasks/bash-N/status.json      the final status, written by a rename
//	tasks/bash-N/status.reserve   room kept for it, so that a full disk
//	                              cannot keep it from being written
//	sessions/<key>/tasks/bash-N   the tasks of one owner
//	sessions/<key>/running/bash-N a task not known to have settled
//	sessions/<key>/pending/bash-N a completion notice not yet delivered
//	sessions/<key>/mode           a standing sandbox mode
//	sessions/<key>/workspaces/    the session's pinned workspace (workspaces.go)
//	sessions/<key>/submodules     its workspace's submodule checkouts (rememberedTops)
//	workspaces                    every pinned workspace, a JSON string a
//	                              line, oldest first (workspaces.go)
//	workspaces.lock               taken to add to it, or to build it
//	written, written.lock         every directory a confined call made
//	                              writable, a JSON string a line, and the
//	                              lock taken to add to it (workspaces.go)
//	spools, spools.lock           every spool dir a serve answered in, on
//	                              this state dir or, when this is the
//	                              default state dir, on any (spooldir.go)
//
// Every directory is 0700 and every file 0600.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// hintError is an error with advice for the person reading it, printed on
// a separate "hint:" line.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

// openStateDir creates dir (0700) if missing and refuses one that is not a
// directory, not ours, open to group or others, or in a place another
// user could replace it (checkAncestry). It returns the canonical path.
func openStateDir(dir string) (string, error) {
	abs, canon, err := makeOwnDir(dir, "state dir", stateChoose)
	if err != nil {
		return "", err
	}
	if err := checkAncestry(abs, canon, true, "state dir", stateChoose); err != nil {
		return "", err
	}
	if err := checkPrivateDir(canon); err != nil {
		return "", err
	}
	return canon, nil
}

// stateChoose is how the user names another state dir, for hints.
const stateChoose = "-state-dir or $BASHCALL_STATE_DIR"

// makeOwnDir creates dir (0700, with its missing parents) once what
// exists of its path has passed checkAncestry, so that nothing is made
// through another user's directory or symbolic link, and returns its
// absolute and canonical paths. The missing directories are made one at
// a time, each opened without following a symbolic link and checked to
// be this user's before the next is made in it: a link or directory
// another user puts on the way meanwhile (in a sticky /tmp) is refused,
// not followed.
func makeOwnDir(dir, label, choose string) (abs, canon string, err error) {
	if abs, err = filepath.Abs(dir); err != nil {
		return "", "", fmt.Errorf("%s %q: %w", label, dir, err)
	}
	have := abs
	for _, err := os.Lstat(have); err != nil && have != filepath.Dir(have); _, err = os.Lstat(have) {
		have = filepath.Dir(have)
	}
	if have != abs {
		resolved, err := filepath.EvalSymlinks(have)
		if err != nil {
			return "", "", fmt.Errorf("%s %q: %w", label, dir, err)
		}
		if err := checkAncestry(have, resolved, false, label, choose); err != nil {
			return "", "", err
		}
		if err := makeBeneath(resolved, strings.TrimPrefix(abs[len(have):], "/")); err != nil {
			return "", "", &hintError{fmt.Errorf("creating the %s %q: %w", label, dir, err), "choose another with " + choose}
		}
	}
	if canon, err = filepath.EvalSymlinks(abs); err != nil {
		return "", "", fmt.Errorf("%s %q: %w", label, dir, err)
	}
	return abs, canon, nil
}

// makeBeneath makes the directories of rest (a relative path) beneath
// the directory parent, 0700, through descriptors (mkdirat, then openat
// with O_NOFOLLOW), and refuses one on the way that is a symbolic link or
// not this user's.
func makeBeneath(parent, rest string) error {
	fd, err := unix.Open(parent, dirOnly, 0)
	if err != nil {
		return err
	}
	for at, name := parent, ""; rest != ""; {
		name, rest, _ = strings.Cut(rest, "/")
		at = filepath.Join(at, name)
		if err := unix.Mkdirat(fd, name, 0o700); err != nil && err != unix.EEXIST {
			unix.Close(fd)
			return fmt.Errorf("mkdir %s: %w", at, err)
		}
		next, err := unix.Openat(fd, name, dirOnly|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("%s is not a directory (a symbolic link put there?): %w", at, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil || int(st.Uid) != os.Geteuid() {
			unix.Close(next)
			return fmt.Errorf("%s was made by uid %d meanwhile", at, st.Uid)
		}
		fd = next
	}
	return unix.Close(fd)
}

// checkAncestry refuses a directory of bashcall's (the label says which)
// that another user could rename away and replace with one of theirs, or
// redirect: each directory above it, on its path as named and as
// resolved, must belong to this user or root and be writable by nobody
// else unless it is sticky (like /tmp, where only an entry's owner may
// rename it), and each symbolic link on the way must belong to this user
// or root. self says named and canon are the directory itself, which
// checkOwnDir checks; else they are what exists of its path, checked as
// directories above it.
func checkAncestry(named, canon string, self bool, label, choose string) error {
	for _, dir := range []string{named, canon} {
		for p := dir; ; p = filepath.Dir(p) {
			fi, err := os.Lstat(p)
			if err != nil {
				return fmt.Errorf("%s %q: %w", label, named, err)
			}
			link := fi.Mode()&fs.ModeSymlink != 0
			if p != dir || link || !self {
				if err := checkAncestor(named, p, fi, label, choose); err != nil {
					return err
				}
			}
			if p == filepath.Dir(p) {
				break
			}
		}
		if named == canon {
			break
		}
	}
	return nil
}

// checkAncestor checks p, a directory above dir or a symbolic link on its
// way (checkAncestry).
func checkAncestor(dir, p string, fi fs.FileInfo, label, choose string) error {
	link := fi.Mode()&fs.ModeSymlink != 0
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		what := "inside"
		if link {
			what = "reached through a symbolic link,"
		}
		return &hintError{fmt.Errorf("%s %q is %s %q, which is owned by uid %d, who could replace it", label, dir, what, p, st.Uid),
			fmt.Sprintf("use a %s in a directory of your own with %s", label, choose)}
	}
	if !link && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return &hintError{fmt.Errorf("%s %q is inside %q, which other users can write (mode %04o, no sticky bit), so they could replace it", label, dir, p, fi.Mode().Perm()),
			fmt.Sprintf("use a %s in a directory only you can write, or chmod go-w or +t %q", label, p)}
	}
	return nil
}

// checkPrivateDir refuses a state dir that another user could read or
// change, naming the path and the fix. One of ours that was opened up or
// closed (a command can chmod what it owns) is restored first, with a
// word on stderr, and everything beneath it too; a directory holding
// anything bashcall does not make there is not bashcall's to change (a
// state dir named by mistake: /etc, a home), and is refused as it is.
func checkPrivateDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() && fi.Mode().Perm() != 0o700 && ownedByMe(fi) {
		was := fi.Mode().Perm()
		closed := was&0o077 == 0 // chmod 000: it cannot be listed as it is
		if closed {
			os.Chmod(dir, 0o700) // to look inside; no one else gains by it
		}
		switch {
		case onlyStateEntries(dir):
			if closed {
				warnf("bashcall: restored mode 0700 of %q (it was %04o)", dir, was)
			}
			repairTree(dir)
		case closed:
			os.Chmod(dir, was)
			return &hintError{fmt.Errorf("state dir %q holds files bashcall does not make there, and its mode is %04o", dir, was),
				"choose another with " + stateChoose}
		}
	}
	return checkOwnDir(dir, "state dir", stateChoose)
}

// stateEntries are the names bashcall makes at the top of a state dir.
var stateEntries = []string{"calls", "lock", "next-id", "sessions", "spill", "spill.lock", "tasks",
	"workspaces", "workspaces.lock", "written", "written.lock", "spools", "spools.lock"}

// onlyStateEntries reports whether dir holds nothing but stateEntries
// and the temporaries of writeFileAtomic.
func onlyStateEntries(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		name := e.Name()
		if !slices.Contains(stateEntries, name) && !(strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp")) {
			return false
		}
	}
	return true
}

// ownedByMe reports whether fi belongs to the user bashcall runs as.
func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// checkOwnDir refuses a directory (the label says which) that is not ours
// or is open to group or others; choose says how to name another one.
func checkOwnDir(dir, label, choose string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s %q: %w", label, dir, err)
	}
	if !fi.IsDir() {
		return &hintError{fmt.Errorf("%s %q is not a directory", label, dir),
			"choose another with " + choose}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return &hintError{fmt.Errorf("%s %q is owned by uid %d, not by this user (uid %d)", label, dir, st.Uid, os.Geteuid()),
			fmt.Sprintf("use a %s of your own with %s", label, choose)}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return &hintError{fmt.Errorf("%s %q is group or other accessible (mode %04o)", label, dir, perm),
			fmt.Sprintf("chmod 700 %q", dir)}
	}
	return nil
}

// privateDir creates (0700) a directory under the state dir; an existing
// one that is not a private directory of ours is refused.
func privateDir(parts ...string) (string, error) {
	dir := filepath.Join(parts...)
	err := os.Mkdir(dir, 0o700)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return dir, err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		fi = repairMode(dir, fi)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		return "", fmt.Errorf("%q is not a private directory", dir)
	}
	return dir, nil
}

// ownerKey is what the state dir records of a session id: a hash, so that
// reading the state dir never reveals another session's token.
func ownerKey(sessionID string) string {
	if sessionID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("bashcall-owner\x00" + sessionID))
	return hex.EncodeToString(sum[:])
}

// sessionDir is the state dir's directory of one owner key.
func (inv *invocation) sessionDir(key string) string { return sessionDir(inv.stateDir, key) }

// writeFileAtomic writes data to p through a private temporary file and a
// rename, so that readers see the old content or the new, never a part.
// The temporary's name starts with a dot, for readers that list the
// directory (spool clients).
func writeFileAtomic(p string, data []byte) error {
	f, tmp, err := createPrivate(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %q: %w", p, err)
	}
	return nil
}

// writeLockedRecord writes v to p as writeJSON does, and keeps an
// exclusive lock on the file for the life of the process (the
// descriptor is never closed, and not inherited: close-on-exec). The lock
// is taken before the file has its name, so no reader sees it unlocked.
func writeLockedRecord(p string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, tmp, err := createPrivate(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return err
	}
	if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("writing %q: %w", p, err)
	}
	lockedRecords = append(lockedRecords, f) // held until the process ends
	return nil
}

// lockedRecords keeps the files of writeLockedRecord open.
var lockedRecords []*os.File

// recordLocked reports whether a process holds the lock of a file that
// writeLockedRecord wrote. Testing it takes a shared lock, so that two
// tests at once do not see each other's.
func recordLocked(p string) bool {
	f, err := openOwn(p, os.O_RDONLY)
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB), syscall.EWOULDBLOCK)
}

func sessionDir(stateDir, key string) string {
	if key == "" {
		key = "none"
	}
	return filepath.Join(stateDir, "sessions", key)
}

// ensureSessionDir creates the private directories of one owner key.
func (inv *invocation) ensureSessionDir(key string) (string, error) {
	if _, err := privateDir(inv.stateDir, "sessions"); err != nil {
		return "", err
	}
	dir := inv.sessionDir(key)
	for _, d := range []string{dir, filepath.Join(dir, "tasks"), filepath.Join(dir, "pending"), filepath.Join(dir, "running"), filepath.Join(dir, "workspaces")} {
		if _, err := privateDir(d); err != nil {
			return "", err
		}
	}
	return dir, nil
}
