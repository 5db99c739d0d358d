package main

// Linux process control: child subreaper, the /proc view of a process tree,
// signals that cannot reach a process which reused a pid (the watcher that
// waits on them: watcher_linux.go).

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// processIdentity says a process can be told from one that reused its
// pid (start time, boot id, pidfd), which background tasks need.
const processIdentity = true

// childSysProcAttr starts a command in a new session (so in its own process
// group, with no controlling terminal) that dies with its parent thread,
// or, with freeze, stops: a frozen leader keeps its pid, so its session id,
// from being reused until whoever cleans up has used it (leftovers.go).
func childSysProcAttr(freeze bool) *syscall.SysProcAttr {
	if freeze {
		return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGSTOP}
	}
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// detachedSysProcAttr starts a process in a new session that outlives us.
func detachedSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}

// selfExe is how bashcall re-executes itself: /proc/self/exe still names
// the running binary if its file was replaced since.
func selfExe() string { return "/proc/self/exe" }

// reexecCheck says why bashcall cannot re-execute itself, nil when it can.
func reexecCheck() error {
	if err := unix.Access(selfExe(), unix.X_OK); err != nil {
		return reexecError(err)
	}
	return nil
}

// reexecError words a failed re-execution of bashcall (launcher,
// supervisor, a serve worker): without /proc, as in a bare chroot or a
// container that does not mount it, every confined call fails this way.
func reexecError(err error) error {
	return fmt.Errorf("cannot re-execute bashcall through %s: %w; mount /proc", selfExe(), err)
}

// setSubreaper makes this process adopt orphaned descendants, so that
// processes which left the command's group (setsid, double fork) can still
// be found and stopped.
func setSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// dupOnto makes newfd another descriptor of what oldfd opened.
func dupOnto(oldfd, newfd int) error { return unix.Dup3(oldfd, newfd, 0) }

// growPipe raises a pipe's buffer to 1 MiB, best effort, to cut context
// switches when a command streams output.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
	}
}

// procStat is what /proc/PID/stat says of one process.
type procStat struct {
	ppid, pgid, sid int
	start           uint64 // clock ticks after boot
	state           byte   // R, S, D, T, Z...
	zombie          bool
}

// readProcStat parses /proc/PID/stat; comm may hold spaces and parentheses,
// so the fields are counted from the last ')'.
func readProcStat(pid int) (procStat, error) {
	b, err := readProcFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed /proc stat")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return procStat{}, errors.New("malformed /proc stat")
	}
	var s procStat
	s.state = f[0][0]
	s.zombie = s.state == 'Z' || s.state == 'X'
	s.ppid, _ = strconv.Atoi(string(f[1]))
	s.pgid, _ = strconv.Atoi(string(f[2]))
	s.sid, _ = strconv.Atoi(string(f[3]))
	s.start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	return s, nil
}

// procStartTime is a process's start time, the half of its identity that a
// reused pid does not share.
func procStartTime(pid int) (uint64, error) {
	if pid == os.Getpid() {
		return selfStart()
	}
	s, err := readProcStat(pid)
	return s.start, err
}

// selfStart is this process's start time, read once: every foreground
// call needs it twice before its command runs.
var selfStart = sync.OnceValues(func() (uint64, error) {
	s, err := readProcStat(os.Getpid())
	return s.start, err
})

// scanProcs reads every process's stat.
func scanProcs() map[int]procStat {
	procs := map[int]procStat{}
	d, err := os.Open("/proc")
	if err != nil {
		return procs
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if s, err := readProcStat(pid); err == nil {
			procs[pid] = s
		}
	}
	return procs
}

// descendants lists every live process below root, with its start time.
func descendants(procs map[int]procStat, root int) map[int]uint64 {
	children := map[int][]int{}
	for pid, s := range procs {
		children[s.ppid] = append(children[s.ppid], pid)
	}
	out := map[int]uint64{}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if _, seen := out[c]; !seen && c != root {
				out[c] = procs[c].start
				queue = append(queue, c)
			}
		}
	}
	return out
}

// signalProcess sends sig to pid only if it is still the process that
// started at start: the pidfd pins the process, and the start time read
// after opening it proves it is the one we mean.
func signalProcess(pid int, start uint64, sig syscall.Signal) error {
	return signalProcessIf(pid, start, sig, nil)
}

// signalProcessIf is signalProcess that also asks still (unless nil),
// once the pidfd is open, whether the process is the one meant: a process
// that was then is the one the pidfd signals.
func signalProcessIf(pid int, start uint64, sig syscall.Signal, still func() bool) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	s, err := procStartTime(pid)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ESRCH), err == nil && s != start:
		return unix.ESRCH // gone, or its pid reused
	case err != nil:
		return err // /proc could not be read (no descriptor left, say)
	case still != nil && !still():
		return unix.ESRCH
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

// holdsPipe reports whether pid has a descriptor open on one of the pipes
// with the given inode numbers (/proc/PID/fd/N reads "pipe:[INODE]").
func holdsPipe(pid int, inodes []uint64) bool {
	if len(inodes) == 0 {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		link, err := os.Readlink(dir + n)
		ino, ok := strings.CutPrefix(link, "pipe:[")
		if err != nil || !ok {
			continue
		}
		if v, err := strconv.ParseUint(strings.TrimSuffix(ino, "]"), 10, 64); err == nil && slices.Contains(inodes, v) {
			return true
		}
	}
	return false
}

// processAlive reports whether pid is still the process started at start
// and has not exited.
func processAlive(pid int, start uint64) bool {
	s, err := readProcStat(pid)
	return err == nil && s.start == start && !s.zombie
}

// bootID identifies this boot, so that a pid recorded before a reboot is
// never taken for a live process. It is read once per process.
var bootID = sync.OnceValue(func() string {
	b, _ := readProcFile("/proc/sys/kernel/random/boot_id")
	return string(bytes.TrimSpace(b))
})

// readProcFile reads a small file of /proc with plain system calls: a
// call reads several, and os.ReadFile spends as many calls again making
// each one pollable and then not.
func readProcFile(p string) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 1024)
	for {
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		if b = b[:len(b)+n]; len(b) == cap(b) {
			b = slices.Grow(b, len(b))
		}
	}
}

// serveChildSysProcAttr makes a call's bashcall process abort (and stop its
// command) when serve dies.
func serveChildSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// isTerminal reports whether f is a terminal (it answers TCGETS). Its
// descriptor is used through SyscallConn: Fd would make it blocking.
func isTerminal(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var terr error = unix.ENOTTY
	rc.Control(func(fd uintptr) { _, terr = unix.IoctlGetTermios(int(fd), unix.TCGETS) })
	return terr == nil
}

// fileIdentity is p's device, inode and birth time in ns (0 where the
// filesystem records none), which tell it from a file made at its path
// later (statx).
func fileIdentity(p string) (dev, ino uint64, birth int64, err error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_INO|unix.STATX_BTIME, &st); err != nil {
		return 0, 0, 0, err
	}
	if st.Mask&unix.STATX_BTIME != 0 {
		birth = st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
	}
	return unix.Mkdev(st.Dev_major, st.Dev_minor), st.Ino, birth, nil
}

// dirOnly opens a directory to make and open entries beneath it, as
// search permission alone allows (O_PATH: a home of mode 0311 is one).
const dirOnly = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC

// roomForThreads says why bashcall must not go on when the soft limit on
// the user's processes is below minProcesses. Root is not held to it.
func roomForThreads() error {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NPROC, &lim) != nil || lim.Cur == unix.RLIM_INFINITY || lim.Cur >= minProcesses || os.Getuid() == 0 {
		return nil
	}
	return fmt.Errorf("the limit on the user's processes (ulimit -u, RLIMIT_NPROC) is %d; bashcall needs at least %d for its threads and the command's processes", lim.Cur, minProcesses)
}

// openRegular opens p for reading if it is a regular file (a symlink
// followed), and opens nothing else: p is opened O_PATH first, which
// opens no device, FIFO or socket, checked, then opened again through
// that descriptor, so that nothing can be swapped in meanwhile.
func openRegular(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%q is not a regular file", p)
	}
	return os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDONLY|syscall.O_NOCTTY, 0)
}

// ownerRWXDir gives directory dir, where this user owns it, its owner's
// rwx back if a command took them away (Landlock does not govern chmod):
// a restore opens it, which a writable directory of mode 000 refuses even
// its owner. A symlink put in its place is not followed (O_NOFOLLOW with
// O_DIRECTORY); the mode is set through the descriptor's /proc name.
func ownerRWXDir(dir string) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || int(st.Uid) != os.Geteuid() || st.Mode&0o700 == 0o700 {
		return
	}
	unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o7777|0o700)
}

// kernelPath is p as the kernel resolves it, canonical: opened O_PATH
// (nothing is opened for reading, no device acts), and named back by
// /proc/self/fd. errNoProc where /proc cannot say.
func kernelPath(p string) (string, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	c, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !filepath.IsAbs(c) {
		return "", errNoProc
	}
	return c, nil
}
