package main

// The task tools' hold on a task, and the descriptors they need free.
//
// A task in use is not collected: bash_output and bash_kill hold the
// task's directory open with a shared lock while they work on it, and gc
// removes only a task whose directory it can lock exclusively, so a kill
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

// What the task tools need free, checked once the task is loaded (its
// task.json read with one), before they hold it: its directory, held, and
// at once a record, a /proc file, a pidfd and a lock of its supervisor's,
// with room to spare (a kill and a read needed 4 free, measured with
// ulimit -n); and before a wait, on top of that hold, the watcher's
// inotify instance, pidfd and wake pipe and a look at the task (7);
// bashcall wait checks for as many before it waits.
// Short of them, each look at a process would take "cannot open" for
// "gone", and a running task would be answered as unknown, killed or
// already finished.
const (
	toolDescriptors = 6
	waitDescriptors = 8
)

// errCannotLook is a task tool's answer when it cannot look at the task
// now (too few descriptors, gc at it): it claims nothing of the task.
func errCannotLook(tool, id string, err error) error {
	return toolErrorf("cannot look at background task %s now (%v); call %s again", id, err, tool)
}

// shortOfDescriptors says err is the process's or the system's table of
// descriptors full.
func shortOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

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

// holdWait bounds how long a tool waits for gc to let go of a task. gc
// holds only a settled task, and only while it removes it: a tool still
// refused after holdWait (a gc stopped midway) says it cannot look now.
const holdWait = time.Second

// errCollecting is hold's answer when gc holds the task past holdWait.
var errCollecting = errors.New("gc is removing it")

// hold takes the shared lock on t's directory. It fails with
// os.ErrNotExist when the directory is no longer the one loaded (gc moved
// it aside meanwhile), with errCollecting when gc holds it past holdWait,
// or with why the directory could not be opened.
func (t *task) hold() error {
	d, err := lockTaskDir(t.dir, syscall.LOCK_SH, holdWait)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errCollecting
	}
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
// trying for up to wait. A directory no longer at its path once locked
// (gc moves a task's aside before it removes it) is os.ErrNotExist.
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
		return nil, err
	}
	var held, now syscall.Stat_t
	if syscall.Fstat(int(d.Fd()), &held) != nil || syscall.Lstat(dir, &now) != nil || held.Dev != now.Dev || held.Ino != now.Ino {
		d.Close()
		return nil, os.ErrNotExist
	}
	return d, nil
}
