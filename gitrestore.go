package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"syscall"
	"time"
)

// Putting protected paths back (the snapshot mechanism of gitguard.go,
// and the removal of protected paths a call created under either
// mechanism): after a call, after a background task settles, and every
// second while it runs.

// restore puts every protected path back as recorded and returns the
// paths it put back, sorted (a path it could not put back is in the
// error, not in the list). The command's tree is gone by then (but for
// the sweeps of a running task). Each change goes through an os.Root of
// the writable directory, one directory at a time (openBeneath), so that
// a symlink the command planted cannot lead the restore anywhere, inside
// the directory or out. What the call made that git would reach is then
// made harmless (undoNew), and listed too.
func (g *gitGuard) restore() (reverted []string, err error) {
	reverted, made, _, err := g.restoreParts(nil)
	return mergeSorted(reverted, made), err
}

// restoreParts is restore, with the paths put back apart from those of
// repositories made harmless; in a sweep (swept not nil), replanted says
// the task undid what an earlier sweep did to a repository it made.
func (g *gitGuard) restoreParts(swept *sweptRepos) (reverted, made []string, replanted bool, err error) {
	if g == nil {
		return nil, nil, false, nil
	}
	roots := map[string]*os.Root{}
	defer func() {
		for _, r := range roots {
			if r != nil { // one that could not be opened (undoNew)
				r.Close()
			}
		}
	}()
	var errs []error
	for i := range g.Entries {
		e := &g.Entries[i]
		r, ok := roots[e.Root]
		if !ok {
			var oerr error
			ownerRWXDir(e.Root)
			if r, oerr = os.OpenRoot(e.Root); oerr != nil {
				errs = append(errs, oerr)
				continue
			}
			roots[e.Root] = r
		}
		changed, rerr := e.restoreIn(r)
		if rerr != nil {
			errs = append(errs, fmt.Errorf("restoring %q: %w", e.path(), rerr))
		} else if changed {
			reverted = append(reverted, e.path())
		}
	}
	// What git would reach that the call made, after the protected
	// paths are back: a .git file put back leads where it led.
	made, replanted, err = g.undoNew(roots, swept)
	if err != nil {
		errs = append(errs, err)
	}
	for _, m := range g.Modes {
		fi, err := os.Lstat(m.Path)
		if err != nil || fi.Mode() == m.Mode || fi.Mode()&fs.ModeSymlink != 0 {
			continue
		}
		if err := os.Chmod(m.Path, m.Mode); err != nil {
			errs = append(errs, fmt.Errorf("restoring the mode of %q: %w", m.Path, err))
			continue
		}
		reverted = append(reverted, m.Path)
	}
	sort.Strings(reverted)
	sort.Strings(made)
	return reverted, made, replanted, errors.Join(errs...)
}

// restoreIn restores one entry; changed says something had to change.
// The entry is reached through openBeneath: a symlink the command left
// where a directory was on the way is replaced by a directory, never
// followed. Where a directory on the way is gone (a worktree or a
// submodule's git dir removed), nothing is left there to restore, nor
// for git to run.
func (e *guardEntry) restoreIn(r *os.Root) (changed bool, err error) {
	if !e.Full && e.Kind != "absent" {
		return false, nil // bound read-only: nothing could change it
	}
	at, err := openBeneath(r, e.Rel, true)
	if errors.Is(err, fs.ErrNotExist) {
		return len(at.fixed) > 0, nil
	}
	if err != nil {
		return len(at.fixed) > 0, err
	}
	defer at.close()
	changed, err = e.restoreAt(at.dir, at.name)
	return changed || len(at.fixed) > 0, err
}

// restoreAt restores the entry, name in directory dir.
func (e *guardEntry) restoreAt(dir *os.Root, name string) (changed bool, err error) {
	fi, err := dir.Lstat(name)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if e.Kind == "absent" {
		if !exists {
			return false, nil
		}
		return true, takeAway(dir, name, fi)
	}
	if e.Shallow {
		// A git dir swapped for a .git file (pointing elsewhere) is made
		// a directory again. A submodule's that is gone stays gone (an
		// empty directory there would only keep git from making it
		// again; the .git file pointing there keeps it protected), but a
		// repository's own .git is made again, for its recorded files:
		// moved away in one call, it would come back planted in the next.
		switch {
		case exists && fi.IsDir(), !exists && !e.Remake:
			return false, nil
		case exists:
			if err := takeAway(dir, name, fi); err != nil {
				return true, err
			}
		}
		return true, dir.Mkdir(name, e.Mode.Perm())
	}
	if exists && fileKind(fi) == e.Kind && e.same(dir, name, fi) {
		return false, nil
	}
	if exists && (fileKind(fi) != e.Kind || e.Kind == "symlink") {
		// A directory there (a git dir moved back where a symlink to it
		// was, a forged .git dir where the .git file was) is moved aside.
		if err := takeAway(dir, name, fi); err != nil {
			return true, err
		}
		exists = false
	}
	switch e.Kind {
	case "file":
		err = e.replaceFile(dir, name)
	case "dir":
		if !exists {
			err = dir.Mkdir(name, e.Mode.Perm())
		}
		if err == nil {
			err = dir.Chmod(name, e.Mode)
		}
		if err == nil {
			err = e.removeAdded(dir, name)
		}
	case "symlink":
		err = dir.Symlink(string(e.Data), name)
	}
	return true, err
}

// replaceFile writes the recorded content to a new file and renames it
// over the path, so that whatever the command left there (a hard link to
// another file, say) is replaced, never written through. The new file's
// name is random: a name the command could tell in advance, it could hold
// with a directory of its own and so keep the restore from happening. If
// the new file cannot be written (the command filled the disk), what the
// command left is removed, which frees its blocks, and the write is tried
// once more: a protected file ends up restored or absent, never as the
// command left it.
func (e *guardEntry) replaceFile(dir *os.Root, name string) error {
	err := e.writeOver(dir, name)
	if err == nil {
		return nil
	}
	if rerr := dir.RemoveAll(name); rerr != nil {
		return errors.Join(err, rerr)
	}
	if err := e.writeOver(dir, name); err != nil {
		return fmt.Errorf("%w (the changed file was removed)", err)
	}
	return nil
}

// writeOver writes the recorded content to a new file beside the path and
// renames it over the path.
func (e *guardEntry) writeOver(dir *os.Root, name string) error {
	tmp := name + ".bashcall-restore-" + rand.Text()
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, e.Mode.Perm())
	if err != nil {
		return err
	}
	_, err = f.Write(e.Data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dir.Chmod(tmp, e.Mode)
	}
	if err == nil {
		err = dir.Rename(tmp, name)
	}
	if err != nil {
		dir.Remove(tmp)
	}
	return err
}

// same reports whether name in dir still holds what was recorded.
func (e *guardEntry) same(dir *os.Root, name string, fi fs.FileInfo) bool {
	if fi.Mode() != e.Mode && e.Kind != "symlink" {
		return false
	}
	switch e.Kind {
	case "file":
		b, err := dir.ReadFile(name)
		return err == nil && bytes.Equal(b, e.Data)
	case "symlink":
		t, err := dir.Readlink(name)
		return err == nil && t == string(e.Data)
	case "dir":
		sub, err := subdir(dir, name)
		if err != nil {
			return false
		}
		defer sub.Close()
		names, err := dirNames(sub)
		return err == nil && equalStrings(names, e.Names)
	}
	return true
}

// removeAdded removes the entries of directory name in dir that were not
// recorded.
func (e *guardEntry) removeAdded(dir *os.Root, name string) error {
	sub, err := subdir(dir, name)
	if err != nil {
		return err
	}
	defer sub.Close()
	names, err := dirNames(sub)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, n := range e.Names {
		keep[n] = true
	}
	for _, n := range names {
		if keep[n] {
			continue
		}
		fi, err := sub.Lstat(n)
		if err == nil {
			err = takeAway(sub, n, fi) // a directory moved aside: git runs none
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// dirNames lists the directory r, sorted.
func dirNames(r *os.Root) ([]string, error) {
	f, err := r.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// restored records the outcome of a restore in the run's facts.
func (f *sandboxFacts) restored(reverted []string, err error) {
	f.Reverted = reverted
	if err != nil {
		f.RestoreFailed = err.Error()
	}
}

// sweep restores the protected paths every period while a background
// task runs, so that what it plants (a commondir, a hook) does not wait
// for the task to settle; the returned stop ends the sweeps and returns
// what they put back. A sweep that has to put something back after an
// earlier one did calls replanted, once: a task that plants again, in a
// loop, would otherwise keep a planted file there nearly all the time.
func (g *gitGuard) sweep(period time.Duration, replanted func()) (stop func() []string) {
	if g == nil || len(g.Entries) == 0 && len(g.Watch) == 0 {
		return func() []string { return nil }
	}
	done, result := make(chan struct{}), make(chan []string, 1)
	go func() {
		var all []string
		putBack := false // a protected path was put back
		swept := &sweptRepos{times: map[string]int{}}
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				result <- all
				return
			case <-t.C:
				// A repository made harmless again is replanting only as
				// sweptRepos.replanted tells: a git clone or submodule
				// update running longer than a sweep writes its config
				// more than once.
				reverted, made, undone, _ := g.restoreParts(swept)
				if (len(reverted) > 0 && putBack || undone) && replanted != nil {
					replanted()
					replanted = nil
				}
				putBack = putBack || len(reverted) > 0
				all = mergeSorted(all, mergeSorted(reverted, made))
			}
		}
	}()
	return func() []string {
		close(done)
		return <-result
	}
}

// mergeSorted is the sorted union of two sorted lists.
func mergeSorted(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(append([]string(nil), a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// capture reads what the snapshot needs to restore the entry.
func (e *guardEntry) capture(dir *os.Root, name string, budget *int) error {
	var err error
	switch e.Kind {
	case "file":
		if e.Data, err = readSmallIn(dir, name, max(*budget, 0)); errors.Is(err, errTooLarge) {
			err = errGuardFull
		}
	case "symlink":
		var t string
		t, err = dir.Readlink(name)
		e.Data = []byte(t)
	case "dir":
		var f *os.File
		var entries []os.DirEntry
		if f, err = dir.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0); err == nil {
			entries, err = readDirFile(f)
			f.Close()
		}
		if errors.Is(err, errTooLarge) {
			err = errGuardFull
		}
		for _, d := range entries {
			e.Names = append(e.Names, d.Name())
		}
		sort.Strings(e.Names) // as dirNames lists them
	}
	if err != nil {
		return fmt.Errorf("protecting %q: %w", e.path(), err)
	}
	if *budget -= len(e.Data); *budget < 0 {
		return fmt.Errorf("protecting %q: %w", e.path(), errGuardFull)
	}
	return nil
}

// errGuardFull is a top's protected git files over its budget.
var errGuardFull = fmt.Errorf("the protected git files are over %d paths or %d bytes", maxGuardEntries, maxGuardBytes)
