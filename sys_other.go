//go:build !linux

package main

// Process control where Linux's is missing: no subreaper, no /proc tree, no
// pidfd, no inotify. Commands still get their own session and process
// group; escaped descendants cannot be found, and waits poll slowly.

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// processIdentity is false: a pid cannot be told from a reused one here,
// so background tasks (whose processes later invocations signal) are
// refused.
const processIdentity = false

func childSysProcAttr(bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
func detachedSysProcAttr() *syscall.SysProcAttr  { return &syscall.SysProcAttr{Setsid: true} }

func setSubreaper() error { return nil }

func selfExe() string {
	p, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return p
}
func growPipe(*os.File) {}

func dupOnto(oldfd, newfd int) error { return syscall.Dup2(oldfd, newfd) }

func reexecCheck() error {
	if _, err := os.Stat(selfExe()); err != nil {
		return reexecError(err)
	}
	return nil
}

func reexecError(err error) error {
	return fmt.Errorf("cannot re-execute bashcall through %s: %w", selfExe(), err)
}

type procStat struct {
	ppid, pgid, sid int
	start           uint64
	state           byte
	zombie          bool
}

func readProcStat(int) (procStat, error)                        { return procStat{}, errors.New("no /proc") }
func procStartTime(int) (uint64, error)                         { return 0, nil }
func scanProcs() map[int]procStat                               { return map[int]procStat{} }
func descendants(map[int]procStat, int) map[int]uint64          { return map[int]uint64{} }
func signalProcess(pid int, _ uint64, sig syscall.Signal) error { return syscall.Kill(pid, sig) }
func signalProcessIf(pid int, _ uint64, sig syscall.Signal, still func() bool) error {
	if still != nil && !still() {
		return syscall.ESRCH
	}
	return syscall.Kill(pid, sig)
}
func holdsPipe(int, []uint64) bool        { return false }
func processAlive(pid int, _ uint64) bool { return syscall.Kill(pid, 0) == nil }
func bootID() string                      { return "" }

type watcher struct{}

func newWatcher(string, int, uint64) *watcher { return &watcher{} }
func (w *watcher) wait(timeout time.Duration) (exited []int) {
	time.Sleep(min(max(timeout, 0), 50*time.Millisecond))
	return nil
}
func (w *watcher) close()                   {}
func (w *watcher) watchDir(string)          {}
func (w *watcher) watchProcess(int, uint64) {}
func (w *watcher) interrupt()               {}

func serveChildSysProcAttr() *syscall.SysProcAttr { return nil }

// isTerminal reports whether f is a character device other than
// /dev/null: a terminal, as near as the portable file mode tells.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// fileIdentity is p's device and inode; no birth time here.
func fileIdentity(p string) (dev, ino uint64, birth int64, err error) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0, 0, 0, err
	}
	return uint64(st.Dev), uint64(st.Ino), 0, nil
}

// dirOnly opens a directory to make and open entries beneath it.
const dirOnly = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC

// roomForThreads: the limit on processes is not checked here.
func roomForThreads() error { return nil }

// openRegular opens p for reading if it is a regular file, without
// waiting on a FIFO.
func openRegular(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	return keepRegular(f, p)
}

// ownerRWXDir gives directory dir, where this user owns it, its owner's
// rwx back (see sys_linux.go), unless a symlink is in its place.
func ownerRWXDir(dir string) {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o700 == 0o700 {
		return
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Geteuid() {
		os.Chmod(dir, fi.Mode().Perm()|0o700)
	}
}

// kernelPath is errNoProc here: resolveSubmodule walks the path itself.
func kernelPath(string) (string, error) { return "", errNoProc }

// waitChild reaps the child pid and returns its status: there is no
// pidfd here.
func waitChild(pid int) syscall.WaitStatus { return waitChildBlocking(pid) }
