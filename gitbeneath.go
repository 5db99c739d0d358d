package main

// The directories on the way to the protected git paths: each path is
// recorded (record) and restored reached one directory at a time, never
// through a symlink, and, under a mount namespace, the directories on the
// way to each git dir are pinned (pinUp).
//
// Reaching a path: an os.Root keeps a path inside the writable
// directory, but follows a symlink that stays there: a command that
// swapped .git/modules/m for a link to .. would have the restore write
// m's recorded config over .git/config, and remove .git's other files as
// m's added entries. Every directory on the way is opened as the
// directory a Lstat saw (os.SameFile), so a link swapped in between the
// two is caught as well.

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// errNotDirOnWay is a symlink, or another file, where a directory was.
var errNotDirOnWay = errors.New("not a directory")

// subdir opens the directory name of r (one name) as a root of its own:
// never a symlink, and the directory that Lstat saw.
func subdir(r *os.Root, name string) (*os.Root, error) {
	fi, err := r.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%q: %w", name, errNotDirOnWay)
	}
	sub, err := r.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	st, err := sub.Stat(".")
	if err == nil && !os.SameFile(fi, st) {
		err = fmt.Errorf("%q was replaced while it was opened", name)
	}
	if err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// beneath is the directory that holds a protected path, opened through
// subdir from the writable directory's root, and the path's name there.
type beneath struct {
	dir  *os.Root
	name string
	own  bool // dir is not the root it was opened from: close it
	// fixed are the directories on the way that a symlink or a file had
	// replaced, put back (empty) by the restore.
	fixed []string
}

// openBeneath opens the directory holding rel inside r. A directory on
// the way that is gone is fs.ErrNotExist. With repair (the restore), a
// symlink or file where a directory was is replaced by an empty
// directory, into which the restore then puts what it recorded there,
// and each directory on the way gets its owner's rwx back (ownerRWX);
// without it (the snapshot) a symlink on the way is an error. On an error
// the returned beneath holds no directory, but what was fixed on the way.
func openBeneath(r *os.Root, rel string, repair bool) (*beneath, error) {
	parent, name := filepath.Split(rel)
	b := &beneath{dir: r, name: name}
	if repair {
		ownerRWX(r, ".")
	}
	walked := ""
	for _, c := range strings.Split(strings.Trim(parent, "/"), "/") {
		if c == "" {
			continue
		}
		walked = filepath.Join(walked, c)
		if repair {
			ownerRWX(b.dir, c)
		}
		next, err := subdir(b.dir, c)
		if errors.Is(err, errNotDirOnWay) && repair {
			// Moved aside, not removed: what is there may be the user's.
			if err = moveAside(b.dir, c); err == nil || errors.Is(err, fs.ErrNotExist) {
				err = b.dir.Mkdir(c, 0o755)
			}
			if err == nil {
				b.fixed = append(b.fixed, walked)
				next, err = subdir(b.dir, c)
			}
		}
		if err != nil {
			b.close()
			b.dir, b.own = nil, false
			return b, err
		}
		b.close()
		b.dir, b.own = next, true
	}
	return b, nil
}

// ownerRWX gives directory name of dir, where this user owns it, its
// owner's rwx back if a command took them away (Landlock does not govern
// chmod): the restore writes there, and a git dir made 555 after
// planting in it would otherwise keep what was planted.
func ownerRWX(dir *os.Root, name string) {
	fi, err := dir.Lstat(name)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o700 == 0o700 {
		return
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Geteuid() {
		dir.Chmod(name, fi.Mode().Perm()|0o700)
	}
}

// takeAway removes name from dir: a directory is moved aside (its
// contents may be the user's, or made undeletable, 555), anything else
// removed.
func takeAway(dir *os.Root, name string, fi fs.FileInfo) error {
	if fi.IsDir() {
		return moveAside(dir, name)
	}
	return dir.Remove(name)
}

// moveAside renames name in dir to a new name beside it, NAME.bashcall-
// moved-RANDOM: what the restore must take away from a protected path
// (a link where a directory was on the way, a directory where a symlink
// was) is kept, not removed with whatever it holds.
func moveAside(dir *os.Root, name string) error {
	_, err := moveAsideAs(dir, name)
	return err
}

// moveAsideAs is moveAside, and the name it gave.
func moveAsideAs(dir *os.Root, name string) (string, error) {
	to := name + ".bashcall-moved-" + rand.Text()
	return to, dir.Rename(name, to)
}

// close closes the directory, unless it is the root itself.
func (b *beneath) close() {
	if b.own && b.dir != nil {
		b.dir.Close()
	}
}

// record notes one protected path. A missing hooks directory is created
// first when makeHooks (git init makes one too), so that it can be
// protected like any.
func (g *gitGuard) record(root, p string, full, makeHooks bool, b *guardBudget) error {
	// Through the writable directory's os.Root: a directory on the way
	// swapped for a symlink (to the user's home, say) cannot have the
	// snapshot read, or a hooks/ made, outside it.
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("protecting %q: %w", p, err)
	}
	defer r.Close()
	rel, _ := filepath.Rel(root, p)
	e := guardEntry{Root: root, Rel: rel, Full: full}
	// One directory at a time, never through a symlink (openBeneath):
	// every path here was canonical when it was found, so a link on the
	// way now is a command's swap.
	at, err := openBeneath(r, rel, false)
	if errors.Is(err, fs.ErrNotExist) {
		e.Kind = "absent" // its directory is gone: removed if it appears
		g.Entries = append(g.Entries, e)
		return nil
	}
	if err != nil {
		return fmt.Errorf("protecting %q: %w", p, err)
	}
	defer at.close()
	fi, err := at.dir.Lstat(at.name)
	if errors.Is(err, fs.ErrNotExist) && at.name == "hooks" && makeHooks {
		if at.dir.Mkdir(at.name, 0o755) == nil {
			fi, err = at.dir.Lstat(at.name)
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e.Kind = "absent"
	case err != nil:
		return fmt.Errorf("protecting %q: %w", p, err)
	default:
		e.Kind, e.Mode = fileKind(fi), fi.Mode()
	}
	if !full && e.Kind == "symlink" {
		// No mount can cover a symlink: it is put back after the call,
		// as a snapshot would.
		if t, err := at.dir.Readlink(at.name); err == nil {
			e.Data, e.Full = []byte(t), true
		}
	}
	if !full && e.Kind == "file" && at.name == ".git" {
		// A .git file is bound read-only, and put back after the call
		// too: the directories above a checkout's .git are not pinned,
		// and one renamed away takes the bind along.
		if e.Data, err = readSmallIn(at.dir, at.name, 4096); err != nil {
			return fmt.Errorf("protecting %q: %w", p, err)
		}
		e.Full = true
	}
	if full {
		if err := e.capture(at.dir, at.name, &b.bytes); err != nil {
			return err
		}
	}
	g.Entries = append(g.Entries, e)
	if full && e.Kind == "dir" {
		for _, n := range e.Names {
			if b.over(&b.entries) {
				return errGuardFull
			}
			if err := g.record(root, filepath.Join(p, n), full, makeHooks, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// pinUp pins directory d and every directory above it below root (each
// is bound onto itself under a mount namespace), charged to b: a mount
// stops the rename of the directory it is on, not of one above it, and a
// command that renamed .git/modules or .git/worktrees away (the binds in
// it go along) could put a forged copy in its place. A checkout's own
// directories (those above a submodule's .git file) are not pinned: the
// .git file is put back after the call (record), so that they can be
// renamed.
func (g *gitGuard) pinUp(d, root string, b *guardBudget, done map[string]bool) error {
	for ; d != root && within(d, root) && !done["pin:"+d]; d = filepath.Dir(d) {
		if b.over(&b.entries) || b.overPath(d) {
			return b.spend()
		}
		done["pin:"+d] = true
		g.Pins = append(g.Pins, d)
	}
	return nil
}

// recordShallow notes that git dir p is a directory, so that a swap for
// a .git file is undone.
func (g *gitGuard) recordShallow(root, p string, remake bool) error {
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() {
		return nil
	}
	rel, _ := filepath.Rel(root, p)
	g.Entries = append(g.Entries, guardEntry{Root: root, Rel: rel, Kind: "dir", Mode: fi.Mode(), Full: true, Shallow: true, Remake: remake})
	return nil
}

// controlModes records the modes of controls and of their ancestors that
// this user owns (the ones a command could chmod).
func controlModes(controls []string) []modeEntry {
	var out []modeEntry
	seen := map[string]bool{}
	for _, c := range controls {
		for p := c; p != "/" && p != "." && !seen[p]; p = filepath.Dir(p) {
			seen[p] = true
			fi, err := os.Lstat(p)
			if err != nil {
				continue
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Geteuid() && fi.Mode()&fs.ModeSymlink == 0 {
				out = append(out, modeEntry{Path: p, Mode: fi.Mode()})
			}
		}
	}
	return out
}

// containing is the directory of dirs that p lies in, or "".
func containing(p string, dirs []string) string {
	for _, d := range dirs {
		if within(p, d) {
			return d
		}
	}
	return ""
}

// fileKind names what fi is.
func fileKind(fi fs.FileInfo) string {
	switch {
	case fi.Mode().IsRegular():
		return "file"
	case fi.IsDir():
		return "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}
