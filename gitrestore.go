package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
// error, not in the list). The command's tree is gone by then. Each
// change goes through an os.Root of the writable directory, so that a
// symlink the command planted cannot lead the restore outside it.
func (g *gitGuard) restore() (reverted []string, err error) {
	if g == nil {
		return nil, nil
	}
	roots := map[string]*os.Root{}
	defer func() {
		for _, r := range roots {
			r.Close()
		}
	}()
	var errs []error
	for i := range g.Entries {
		e := &g.Entries[i]
		r, ok := roots[e.Root]
		if !ok {
			var oerr error
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
	return reverted, errors.Join(errs...)
}

// restoreIn restores one entry; changed says something had to change.
func (e *guardEntry) restoreIn(r *os.Root) (changed bool, err error) {
	fi, err := r.Lstat(e.Rel)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if e.Kind == "absent" {
		if !exists {
			return false, nil
		}
		return true, r.RemoveAll(e.Rel)
	}
	if e.Shallow {
		if exists && fi.IsDir() {
			return false, nil
		}
		if exists {
			if err := r.RemoveAll(e.Rel); err != nil {
				return true, err
			}
		}
		return true, r.Mkdir(e.Rel, e.Mode.Perm())
	}
	if !e.Full {
		return false, nil // bound read-only: nothing could change it
	}
	if exists && fileKind(fi) == e.Kind && e.same(r, fi) {
		return false, nil
	}
	if exists && (fileKind(fi) != e.Kind || e.Kind == "symlink") {
		if err := r.RemoveAll(e.Rel); err != nil {
			return true, err
		}
		exists = false
	}
	switch e.Kind {
	case "file":
		err = e.replaceFile(r)
	case "dir":
		if !exists {
			err = r.Mkdir(e.Rel, e.Mode.Perm())
		}
		if err == nil {
			err = r.Chmod(e.Rel, e.Mode)
		}
		if err == nil {
			err = e.removeAdded(r)
		}
	case "symlink":
		err = r.Symlink(string(e.Data), e.Rel)
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
func (e *guardEntry) replaceFile(r *os.Root) error {
	err := e.writeOver(r)
	if err == nil {
		return nil
	}
	if rerr := r.RemoveAll(e.Rel); rerr != nil {
		return errors.Join(err, rerr)
	}
	if err := e.writeOver(r); err != nil {
		return fmt.Errorf("%w (the changed file was removed)", err)
	}
	return nil
}

// writeOver writes the recorded content to a new file beside the path and
// renames it over the path.
func (e *guardEntry) writeOver(r *os.Root) error {
	tmp := e.Rel + ".bashcall-restore-" + rand.Text()
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, e.Mode.Perm())
	if err != nil {
		return err
	}
	_, err = f.Write(e.Data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Chmod(tmp, e.Mode)
	}
	if err == nil {
		err = r.Rename(tmp, e.Rel)
	}
	if err != nil {
		r.Remove(tmp)
	}
	return err
}

// same reports whether the path still holds what was recorded.
func (e *guardEntry) same(r *os.Root, fi fs.FileInfo) bool {
	if fi.Mode() != e.Mode && e.Kind != "symlink" {
		return false
	}
	switch e.Kind {
	case "file":
		b, err := r.ReadFile(e.Rel)
		return err == nil && bytes.Equal(b, e.Data)
	case "symlink":
		t, err := r.Readlink(e.Rel)
		return err == nil && t == string(e.Data)
	case "dir":
		names, err := dirNames(r, e.Rel)
		return err == nil && equalStrings(names, e.Names)
	}
	return true
}

// removeAdded removes a directory's entries that were not recorded.
func (e *guardEntry) removeAdded(r *os.Root) error {
	names, err := dirNames(r, e.Rel)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, n := range e.Names {
		keep[n] = true
	}
	for _, n := range names {
		if !keep[n] {
			if err := r.RemoveAll(filepath.Join(e.Rel, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// dirNames lists a directory inside r, sorted.
func dirNames(r *os.Root, rel string) ([]string, error) {
	f, err := r.Open(rel)
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
	if g == nil || len(g.Entries) == 0 {
		return func() []string { return nil }
	}
	done, result := make(chan struct{}), make(chan []string, 1)
	go func() {
		var all []string
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				result <- all
				return
			case <-t.C:
				reverted, _ := g.restore()
				if len(reverted) > 0 && len(all) > 0 && replanted != nil {
					replanted()
					replanted = nil
				}
				all = mergeSorted(all, reverted)
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
func (e *guardEntry) capture(r *os.Root, budget *int) error {
	var err error
	switch e.Kind {
	case "file":
		if e.Data, err = readSmallIn(r, e.Rel, max(*budget, 0)); errors.Is(err, errTooLarge) {
			err = errGuardFull
		}
	case "symlink":
		var t string
		t, err = r.Readlink(e.Rel)
		e.Data = []byte(t)
	case "dir":
		var f *os.File
		var entries []os.DirEntry
		if f, err = r.OpenFile(e.Rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0); err == nil {
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

// readDirBounded lists directory p (never anything else: a FIFO swapped
// in is not waited on), up to maxGuardEntries entries; more is
// errTooLarge, with none listed.
func readDirBounded(p string) ([]os.DirEntry, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readDirFile(f)
}

// readDirFile lists the open directory f as readDirBounded does.
func readDirFile(f *os.File) ([]os.DirEntry, error) {
	entries, err := f.ReadDir(maxGuardEntries + 1)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if len(entries) > maxGuardEntries {
		return nil, fmt.Errorf("%q: %w", f.Name(), errTooLarge)
	}
	return entries, err
}

// readSmallIn is readSmall of rel inside r, never outside it.
func readSmallIn(r *os.Root, rel string, limit int) ([]byte, error) {
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, limit)
}

// errTooLarge is a file over what readSmall may read.
var errTooLarge = errors.New("too large")

// readSmall reads p, a regular file of at most limit bytes (following a
// symlink, as git does). Anything else is not read, nor opened
// (openRegular): a device can act on being opened; the scan runs before
// every confined call and reads where any session's command can write (a
// FIFO there would hang every call, a sparse file of gigabytes cost each
// one its size).
func readSmall(p string, limit int) ([]byte, error) {
	f, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, limit)
}

// readRegular reads the open file f, a regular file of at most limit
// bytes.
func readRegular(f *os.File, limit int) ([]byte, error) {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%q is not a regular file", f.Name())
	case fi.Size() > int64(limit):
		return nil, fmt.Errorf("%q: %w", f.Name(), errTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err == nil && len(b) > limit { // it grew
		err = fmt.Errorf("%q: %w", f.Name(), errTooLarge)
	}
	return b, err
}
