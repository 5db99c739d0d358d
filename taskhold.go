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

// What bash_output and bash_kill need free at their start: the task's
// directory, held, and at once a record, a /proc file, a pidfd and a
// lock of its supervisor's, and for a wait the watcher's inotify
// instance, pidfd and wake pipe and the output files read, with room to
// spare (measured with ulimit -n: a kill and a read need 4, a wait 7).
// Short of them, each look at a process would take "cannot open" for
// "gone", and a running task would be answered as unknown, killed or
// already finished.
const (
	toolDescriptors = 6
	waitDescriptors = 8
)

// errShortOfDescriptors is a task tool's answer when it has too few
// descriptors to look at the task: it claims nothing of the task.
func errShortOfDescriptors(tool, id string, err error) error {
	return toolErrorf("cannot look at background task %s now (%v); call %s again", id, err, tool)
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
// trying for up to wait. A lock still refused after wait is given up: for
// a shared lock the directory is then used without one (nil, nil), for an
// exclusive one it is an error. A directory that is no longer at its path
// (gc renames a task's aside before it removes it) is an error, locked or
// given up.
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
	if err != nil && (how != syscall.LOCK_SH || !errors.Is(err, syscall.EWOULDBLOCK)) {
		d.Close()
		return nil, err
	}
	var held, now syscall.Stat_t
	if syscall.Fstat(int(d.Fd()), &held) != nil || syscall.Lstat(dir, &now) != nil || held.Dev != now.Dev || held.Ino != now.Ino {
		d.Close()
		return nil, os.ErrNotExist
	}
	if err != nil { // a shared lock given up: the directory, unlocked
		d.Close()
		return nil, nil
	}
	return d, nil
}
