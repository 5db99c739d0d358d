package main

// The task tools' hold on a task. A task in use is not collected. bash_output and bash_kill hold the
// task's directory open with a shared lock while they work on it, and gc
// removes only a task whose directory it can lock exclusively: so a kill
// that stopped a task, or found it ended on its own, reads how it ended
// rather than finding it gone (and answering for it without knowing).

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// toolDescriptors is what bash_output and bash_kill need free at their
// start: the task's directory, held, and at once a record, a /proc file,
// a pidfd and a lock of its supervisor's, with room to spare. Short of
// them, each check of whether a process lives would take "cannot open"
// for "gone", and a running task would be answered as unknown or as
// already finished.
const toolDescriptors = 5

// spareDescriptors checks that n more descriptors can be opened now.
func spareDescriptors(n int) error {
	first, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("no file descriptor to spare: %w", err)
	}
	fds := []int{first}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for len(fds) < n {
		fd, err := unix.FcntlInt(uintptr(first), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("fewer than %d file descriptors to spare: %w", n, err)
		}
		fds = append(fds, fd)
	}
	return nil
}

// holdWait bounds how long a tool waits for gc to let go of a task: gc
// holds one only while it removes it, so a longer wait is a gc process
// stopped midway, and the tool goes on without the lock.
const holdWait = time.Second

// hold takes the shared lock on t's directory, and fails if the directory
// is no longer the one loaded (gc removed it meanwhile).
func (t *task) hold() error {
	d, err := lockTaskDir(t.dir, syscall.LOCK_SH, holdWait)
	if err != nil {
		return err
	}
	t.held = d
	return nil
}

// release lets go of what hold took.
func (t *task) release() {
	if t.held != nil {
		t.held.Close()
		t.held = nil
	}
}

// claimForGC takes the exclusive lock on a task's directory, for gc to
// remove it: nil when a tool is at the task, or its directory is gone.
func claimForGC(dir string) *os.File {
	d, _ := lockTaskDir(dir, syscall.LOCK_EX, 0)
	return d
}

// lockTaskDir opens dir (never through a symlink) and locks it with how,
// trying for up to wait. A lock still refused after wait is given up: the
// directory comes back without one (nil, nil) for a shared lock, as an
// error for an exclusive one. A directory that is not at its path once
// locked (removed or replaced meanwhile) is an error.
func lockTaskDir(dir string, how int, wait time.Duration) (*os.File, error) {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err = syscall.Flock(int(d.Fd()), how|syscall.LOCK_NB)
		if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		d.Close()
		if how == syscall.LOCK_SH && errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	var held, now syscall.Stat_t
	if syscall.Fstat(int(d.Fd()), &held) != nil || syscall.Lstat(dir, &now) != nil || held.Dev != now.Dev || held.Ino != now.Ino {
		d.Close()
		return nil, os.ErrNotExist
	}
	return d, nil
}
