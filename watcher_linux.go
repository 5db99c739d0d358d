package main

// The watcher of the waits (bash_output's wait for a task, bashcall wait, serve's
// spool, the reaper of an mcp connection's tasks): inotify on a directory,
// pidfds on processes and a wake pipe, polled together.

import (
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
	inotify   bool // every directory asked for is watched
	pidfds    map[int32]bool
}

// newWatcher watches dir and, when pid > 0, the exit of the process pid
// that started at start.
func newWatcher(dir string, pid int, start uint64) *watcher {
	w := &watcher{wake: -1, inotifyFD: -1, pidfds: map[int32]bool{}}
	var p [2]int
	if unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK) == nil {
		w.fds, w.wake = append(w.fds, unix.PollFd{Fd: int32(p[0]), Events: unix.POLLIN}), p[1]
	}
	if fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK); err == nil {
		w.fds, w.inotifyFD, w.inotify = append(w.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}), fd, true
	}
	w.watchDir(dir)
	w.watchProcess(pid, start)
	return w
}

// watchDir adds a directory. One that cannot be watched makes waits poll.
func (w *watcher) watchDir(dir string) {
	if !w.inotify {
		return
	}
	if _, err := unix.InotifyAddWatch(w.inotifyFD, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_DELETE_SELF); err != nil {
		w.inotify = false
	}
}

// watchProcess adds the exit of the process pid that started at start,
// when pid > 0 and it is still that process.
func (w *watcher) watchProcess(pid int, start uint64) {
	if pid <= 0 {
		return
	}
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		if s, err := procStartTime(pid); err == nil && s == start {
			w.fds = append(w.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			w.pidfds[int32(fd)] = true
		} else {
			unix.Close(fd)
		}
	}
}

// wait blocks until an event, an interrupt or timeout. Without inotify it
// wakes every 50ms, so that callers poll slowly instead of spinning. It
// reports whether a watched process exited, which wakes it once: the
// process's pidfd, readable from then on, is dropped.
func (w *watcher) wait(timeout time.Duration) (exited bool) {
	timeout = max(timeout, 0)
	if !w.inotify {
		timeout = min(timeout, 50*time.Millisecond)
	}
	for {
		_, err := unix.Poll(w.fds, int(timeout.Milliseconds())+1)
		if err != unix.EINTR {
			break
		}
	}
	var buf [4096]byte
	kept := w.fds[:0]
	for _, f := range w.fds {
		switch {
		case f.Revents&unix.POLLIN == 0 || (w.wake >= 0 && f.Fd == w.fds[0].Fd):
		case w.pidfds[f.Fd]:
			unix.Close(int(f.Fd))
			delete(w.pidfds, f.Fd)
			exited = true
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
