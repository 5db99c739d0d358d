package main

// The watcher of the waits (bash_output's wait for a task, bashcall wait, serve's
// spool, the reaper of an mcp connection's tasks): inotify on a directory,
// pidfds on processes and a wake pipe, polled together.

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watcher wakes a waiter when something is created or renamed in a
// directory, when a process exits, or when interrupted. It reads no disk
// while it waits. Create it before checking the condition waited for, so
// that no event falls between the check and the wait.
type watcher struct {
	fds       []unix.PollFd // the wake pipe, then inotify, then pidfds
	wake      int           // write end of the wake pipe
	inotifyFD int
	blind     bool          // something asked for cannot be watched: waits poll
	pidfds    map[int32]int // pidfd: its process's pid
	unseen    []procID      // processes without a pidfd, looked at after each wait
	gone      []int         // watched processes seen exited, for the next wait to report
}

// procID is a process as the watcher tells it from a later one of its pid.
type procID struct {
	pid   int
	start uint64
}

// newWatcher watches dir and, when pid > 0, the exit of the process pid
// that started at start.
func newWatcher(dir string, pid int, start uint64) *watcher {
	w := &watcher{wake: -1, inotifyFD: -1, pidfds: map[int32]int{}}
	var p [2]int
	if unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK) == nil {
		w.fds, w.wake = append(w.fds, unix.PollFd{Fd: int32(p[0]), Events: unix.POLLIN}), p[1]
	}
	if fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK); err == nil {
		w.fds, w.inotifyFD = append(w.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}), fd
	} else {
		w.blind = true
	}
	w.watchDir(dir)
	w.watchProcess(pid, start)
	return w
}

// watchDir adds a directory. One that cannot be watched makes waits poll.
func (w *watcher) watchDir(dir string) {
	if w.inotifyFD < 0 {
		return
	}
	if _, err := unix.InotifyAddWatch(w.inotifyFD, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_DELETE_SELF); err != nil {
		w.blind = true
	}
}

// watchProcess adds the exit of the process pid that started at start,
// when pid > 0. One already gone (no such pid, or the pid reused) has
// exited as far as the next wait is concerned: it reports it at once. One
// that cannot be watched now (no descriptor to spare) makes waits poll,
// and is looked at after each: the wait reports it exited once it is not
// seen alive, which short of descriptors may be early.
func (w *watcher) watchProcess(pid int, start uint64) {
	if pid <= 0 {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, syscall.ESRCH) {
			w.gone = append(w.gone, pid)
		} else {
			w.blind = true
			w.unseen = append(w.unseen, procID{pid, start})
		}
		return
	}
	s, err := procStartTime(pid)
	switch {
	case err == nil && s == start:
		w.fds = append(w.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		w.pidfds[int32(fd)] = pid
		return
	case err == nil || errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH):
		w.gone = append(w.gone, pid) // another process now has the pid, or none
	default:
		w.blind = true
		w.unseen = append(w.unseen, procID{pid, start})
	}
	unix.Close(fd)
}

// wait blocks until an event, an interrupt or timeout. A watcher that
// cannot see all it was asked to wakes every 50ms, so that callers poll
// slowly instead of spinning. It returns the pids of the watched
// processes that exited, each of which wakes it once: the process's
// pidfd, readable from then on, is dropped.
func (w *watcher) wait(timeout time.Duration) (exited []int) {
	exited, w.gone = w.gone, nil
	timeout = max(timeout, 0)
	if w.blind {
		timeout = min(timeout, 50*time.Millisecond)
	}
	ms := int(timeout.Milliseconds()) + 1
	if len(exited) > 0 {
		ms = 0 // it has happened: the poll only gathers the rest
	}
	for {
		_, err := unix.Poll(w.fds, ms)
		if err != unix.EINTR {
			break
		}
	}
	var buf [4096]byte
	kept := w.fds[:0]
	for _, f := range w.fds {
		switch {
		case f.Revents&unix.POLLIN == 0 || (w.wake >= 0 && f.Fd == w.fds[0].Fd):
		case w.pidfds[f.Fd] > 0:
			exited = append(exited, w.pidfds[f.Fd])
			unix.Close(int(f.Fd))
			delete(w.pidfds, f.Fd)
			continue
		default:
			for {
				if n, _ := unix.Read(int(f.Fd), buf[:]); n <= 0 {
					break
				}
			}
		}
		kept = append(kept, f)
	}
	w.fds = kept
	alive := w.unseen[:0]
	for _, p := range w.unseen {
		if processAlive(p.pid, p.start) {
			alive = append(alive, p)
		} else {
			exited = append(exited, p.pid)
		}
	}
	w.unseen = alive
	return exited
}

// interrupt makes the current and every later wait return at once.
func (w *watcher) interrupt() {
	if w.wake >= 0 {
		unix.Write(w.wake, []byte{1})
	}
}

// close releases the watcher's descriptors.
func (w *watcher) close() {
	for _, f := range w.fds {
		unix.Close(int(f.Fd))
	}
	if w.wake >= 0 {
		unix.Close(w.wake)
	}
}
