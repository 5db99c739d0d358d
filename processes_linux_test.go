package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOtherProcesses: a confined command cannot reach another process of
// its user by the calls Landlock's scoping leaves out: it cannot set the
// resource limits of bashcall or of a process outside the call (a CPU
// limit of one second kills it; a descriptor limit of one blinds
// bashcall's reaping), nor its nice value, scheduling policy, CPU
// affinity or I/O priority, nor use the user's keyring (which root shares
// with every root process). Its own limits and priorities it sets as
// before. As root and as nobody, whose victim runs as nobody too.
func TestOtherProcesses(t *testing.T) {
	requireABI(t, 1)
	for _, user := range []string{"root", "nobody"} {
		t.Run(user, func(t *testing.T) {
			if os.Geteuid() != 0 {
				t.Skip("needs root")
			}
			e := newConfinedEnv(t, "")
			victim := exec.Command("sleep", "120")
			if user == "nobody" {
				e.asNobody()
				victim.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID}}
			}
			if err := victim.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { victim.Process.Kill(); victim.Wait() }()
			pid := victim.Process.Pid
			before, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
			if err != nil {
				t.Fatal(err)
			}
			script := fmt.Sprintf(`v=%d
prlimit --pid $v --cpu=1:1 2>/dev/null && echo set-victim-cpu
prlimit --pid $PPID --nofile=1:1 2>/dev/null && echo set-bashcall-nofile
prlimit --pid $$ --nofile=100:100 2>/dev/null && echo set-own-by-pid
renice -n 19 -p $v >/dev/null 2>&1 && echo set-victim-nice
renice -n 19 -u $(id -u) >/dev/null 2>&1 && echo set-user-nice
taskset -p 1 $v >/dev/null 2>&1 && echo set-victim-affinity
chrt -i -p 0 $v >/dev/null 2>&1 && echo set-victim-policy
ionice -c 3 -p $v >/dev/null 2>&1 && echo set-victim-ioprio
perl -e '$r = syscall(%d, 0, -4, 0); print $r < 0 ? "keyctl: $!\n" : "keyctl: the user keyring $r\n"'
perl -e 'my ($t, $d, $p) = ("user", "k", "v"); $r = syscall(%d, $t, $d, $p, 1, -2); print $r < 0 ? "add_key: $!\n" : "add_key: $r\n"'
(ulimit -n 100 && ulimit -t 100) && echo own-ulimit
nice -n 5 true && echo own-nice
prlimit --nofile=100:100 true && echo own-prlimit
ionice -c 3 true && echo own-ionice
taskset 1 true && echo own-taskset
true`, pid, unix.SYS_KEYCTL, unix.SYS_ADD_KEY)
			r := e.call(bashReq(script, ""))
			text := r.text()
			if strings.Contains(text, "set-") {
				t.Errorf("a call on another process went through:\n%s", text)
			}
			for _, want := range []string{"keyctl: Operation not permitted\n", "add_key: Operation not permitted\n",
				"own-ulimit\n", "own-nice\n", "own-prlimit\n", "own-ionice\n", "own-taskset\n"} {
				if !strings.Contains(text, want) {
					t.Errorf("missing %q in:\n%s", want, text)
				}
			}
			after, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
			if err != nil || string(after) != string(before) {
				t.Errorf("the victim's limits changed (%v):\n%s\nto\n%s", err, before, after)
			}
			if prio, err := unix.Getpriority(unix.PRIO_PROCESS, pid); err != nil || prio != 20 {
				t.Errorf("the victim's nice value changed: %d %v", 20-prio, err)
			}
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(pid, &set); err != nil || set.Count() != cpuCount(t) {
				t.Errorf("the victim's affinity changed: %d CPUs %v", set.Count(), err)
			}
		})
	}
}

// cpuCount is how many CPUs this process may run on.
func cpuCount(t *testing.T) int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	return set.Count()
}

// TestKernelObjects: a confined command gets no capabilities back from a
// user namespace of its own (no unshare -U, no clone with CLONE_NEWUSER,
// no clone3), takes no file lease (which stalls writers outside), and,
// under a mount namespace, sees none of the host's System V IPC (a
// private IPC namespace). Forks, subshells and child programs still run.
func TestKernelObjects(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e := newConfinedEnv(t, "")
			e.extraEnv = m.env
			shm, err := unix.SysvShmGet(0x62636c31, 4096, unix.IPC_CREAT|0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.SysvShmCtl(shm, unix.IPC_RMID, nil)
			leased := e.workspace + "/leased"
			if err := os.WriteFile(leased, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			script := fmt.Sprintf(`awk '$2 == %d { print "host-shm-seen" }' /proc/sysvipc/shm
unshare -U true 2>/dev/null && echo made-userns
unshare -r true 2>/dev/null && echo made-root-userns
perl -e 'use Fcntl; open(my $f, "<", "%s") or die; print fcntl($f, %d, F_RDLCK) ? "leased\n" : "lease: $!\n"'
(echo subshell)
bash -c 'echo child'
perl -e 'my $p = fork(); if ($p == 0) { exit 0 } waitpid($p, 0); print "perl-fork\n"'`, shm, leased, unix.F_SETLEASE)
			text := e.call(bashReq(script, "")).text()
			bad := []string{"made-userns", "made-root-userns", "leased\n"}
			if m.name == "namespace" {
				bad = append(bad, "host-shm-seen")
			}
			for _, b := range bad {
				if strings.Contains(text, b) {
					t.Errorf("%q in:\n%s", b, text)
				}
			}
			for _, want := range []string{"lease: Operation not permitted\n", "subshell\n", "child\n", "perl-fork\n"} {
				if !strings.Contains(text, want) {
					t.Errorf("missing %q in:\n%s", want, text)
				}
			}
		})
	}
}

// TestJoinedUserNamespace: a confined command cannot join a user
// namespace that exists already, which would give it every capability
// there (the owner of a user namespace needs none to enter it): not its
// own, which the kernel alone refuses with EINVAL, and, as root, not one
// that another process made and that is bound where the command can open
// it. setns answers EPERM.
func TestJoinedUserNamespace(t *testing.T) {
	requireABI(t, 1)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("needs nsenter (util-linux)")
	}
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e := newConfinedEnv(t, "")
			e.extraEnv = m.env
			script := "nsenter --user=/proc/self/ns/user true; echo \"own: $?\"\n"
			if os.Geteuid() == 0 {
				bound := bindUserNamespace(t, e.workspace+"/userns")
				script += "nsenter --preserve-credentials --user=" + bound + " grep CapEff /proc/self/status; echo \"other: $?\"\n"
			}
			text := e.call(bashReq(script, "")).text()
			if strings.Contains(text, "CapEff") || strings.Contains(text, "Invalid argument") || !strings.Contains(text, "own: 1\n") {
				t.Errorf("a user namespace was joined, or refused by the kernel alone:\n%s", text)
			}
			if n := strings.Count(text, "Operation not permitted"); n != strings.Count(script, "nsenter") {
				t.Errorf("%d of the setns calls answered EPERM:\n%s", n, text)
			}
		})
	}
}

// bindUserNamespace starts a process in a user namespace of its own, in
// which the test's user is root, and binds that namespace at path (an
// nsfs file, as `mount --bind /proc/PID/ns/user` makes it). Both are
// undone at the test's end.
func bindUserNamespace(t *testing.T, path string) string {
	t.Helper()
	holder := exec.Command("sleep", "60")
	holder.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	if err := holder.Start(); err != nil {
		t.Skipf("cannot make a user namespace here: %v", err)
	}
	t.Cleanup(func() {
		holder.Process.Kill()
		holder.Wait()
	})
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("/proc/%d/ns/user", holder.Process.Pid)
	if err := unix.Mount(ns, path, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind %s: %v", ns, err)
	}
	t.Cleanup(func() { unix.Unmount(path, unix.MNT_DETACH) })
	return path
}

// TestFewDescriptors: under a descriptor limit too low for a call, bashcall
// answers with what ran short, never with "no sandbox backend" (which
// would send the model after danger-full-access for a passing shortage).
// A background start that fails is an error, and the task it had
// allocated shows the reason to a later read and sends no notice. The
// limits tried run from too few for anything to all that a call needs.
func TestFewDescriptors(t *testing.T) {
	requireABI(t, 1)
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("needs prlimit (util-linux)")
	}
	e := newConfinedEnv(t, "")
	limited := func(n int, req string) string {
		c := e.cmd("-text")
		c.Args = append([]string{"prlimit", fmt.Sprintf("--nofile=%d:%d", n, n)}, c.Args...)
		c.Path = prlimit
		c.Stdin = strings.NewReader(req)
		out, _ := c.Output()
		return string(out)
	}
	short := 0
	for n := 12; n <= 40; n++ {
		fg := limited(n, bashReq("echo ran", ""))
		bg := limited(n, sessionReq("bash", `{"command":"true","description":"d","run_in_background":true}`, "A"))
		for _, text := range []string{fg, bg} {
			if strings.Contains(text, "no sandbox backend") || strings.Contains(text, "runner") {
				t.Errorf("nofile %d: %q", n, text)
			}
			if strings.Contains(text, "too many open files") {
				short++
			}
		}
		if fg != "ran\n" && !strings.HasPrefix(fg, "Error: ") || !strings.HasPrefix(bg, "started background task bash-") &&
			!strings.HasPrefix(bg, "Error: cannot start the background task: ") {
			t.Errorf("nofile %d: foreground %q, background %q", n, fg, bg)
		}
	}
	if short == 0 {
		t.Error("no limit was too low: the test tried none it meant to")
	}
	tasks, err := readDirNames(filepath.Join(e.stateDir, "tasks"))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no task was allocated: %v", err)
	}
	for _, task := range tasks {
		e.awaitSettled(task)
	}
	list := e.call(sessionReq("bash_list", "{}", "A"))
	for _, task := range tasks {
		out := e.call(outputReq(task, "A", "")).text()
		if strings.Contains(list.text(), task+" killed") && !strings.Contains(out, "too many open files") {
			t.Errorf("%s, whose start failed, reads %q: no reason", task, out)
		}
	}
	if r := e.call(sessionReq("bash_list", "{}", "A")); strings.Contains(strings.Join(append(list.Notices, r.Notices...), "\n"), "killed") {
		t.Errorf("a failed start sent a notice: %q", append(list.Notices, r.Notices...))
	}
}

// TestFewProcesses: under a limit on the user's processes too low for its
// threads, bashcall answers a call with an error response naming the
// limit (exit 1), and a server says so on stderr, rather than dying of the
// Go runtime's fatal error (exit 2, nothing on stdout) when it cannot
// start a thread. doctor says so.
func TestFewProcesses(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("needs prlimit (util-linux)")
	}
	e := newTestEnv(t, "").asNobody() // root is not held to the limit
	limited := func(stdin string, args ...string) (stdout, stderr string, code int) {
		c := e.cmd(args...)
		c.Args = append([]string{"prlimit", fmt.Sprintf("--nproc=%d:%d", minProcesses-12, minProcesses-12)}, c.Args...)
		c.Path = prlimit
		c.Stdin = strings.NewReader(stdin)
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		c.Run()
		return out.String(), errb.String(), c.ProcessState.ExitCode()
	}
	why := fmt.Sprintf("the limit on the user's processes (ulimit -u, RLIMIT_NPROC) is %d; bashcall needs at least %d", minProcesses-12, minProcesses)
	out, stderr, code := limited(`{"id":"p1","name":"bash","arguments":{"command":"echo ran","description":"d"}}`)
	var resp wireResponse
	if json.Unmarshal([]byte(out), &resp) != nil || !strings.Contains(resp.text(), why) || code != 1 {
		t.Errorf("call: exit %d, stdout %q, stderr %q; want an error response naming the limit, exit 1", code, out, stderr)
	}
	if !strings.Contains(out, `"id":"p1"`) {
		t.Errorf("the response does not echo the id: %q", out)
	}
	if _, stderr, code := limited("", "mcp"); code != 1 || !strings.Contains(stderr, why) {
		t.Errorf("mcp: exit %d, stderr %q", code, stderr)
	}
	if out, _, code := limited("", "doctor"); code != 1 || !strings.Contains(out, "missing  processes: "+why) {
		t.Errorf("doctor: exit %d, stdout %q", code, out)
	}
}

// TestWorkdirRaceKeepsNamespace: a workdir whose mode another process
// flips while calls start never makes a call run without its mount
// namespace. As an unprivileged user the launcher's user namespace is
// made before the workdir is entered, so a workdir that cannot be entered
// at that moment fails the start with EACCES, which a namespace the
// kernel refuses can give too: such a call fails to start, or runs in
// the namespace, where a file outside the writable set cannot be
// chmodded (read-only mount), never in the fallback without one, where
// it can.
func TestWorkdirRaceKeepsNamespace(t *testing.T) {
	e := newConfinedEnv(t, "").asNobody()
	dir := filepath.Join(e.workspace, "d")
	outside := filepath.Join(e.dir, "outside")
	for _, p := range []string{dir, outside} {
		var err error
		if p == dir {
			err = os.Mkdir(p, 0o700)
		} else {
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil || os.Chown(p, nobodyID, nobodyID) != nil {
			t.Fatal(err)
		}
	}
	// Its group is root's, which the launcher's user namespace does not
	// map: there the namespace's capabilities do not override its mode.
	if err := os.Chown(dir, nobodyID, 0); err != nil {
		t.Fatal(err)
	}
	req := bashReq("chmod 666 "+outside+" && echo DOWNGRADED", `"workdir":`+jsonString(dir))
	if text := e.call(req).text(); !strings.Contains(text, "Read-only file system") {
		t.Skipf("no mount namespace for an unprivileged user here: %q", text)
	}
	stop := make(chan struct{})
	toggled := make(chan struct{})
	go func() {
		defer close(toggled)
		for {
			select {
			case <-stop:
				os.Chmod(dir, 0o700)
				return
			default:
				os.Chmod(dir, 0)
				time.Sleep(20 * time.Microsecond)
				os.Chmod(dir, 0o700)
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	defer func() { close(stop); <-toggled }()
	seen := map[string]int{}
	for i := 0; i < 100; i++ {
		text := e.call(req).text()
		if strings.Contains(text, "DOWNGRADED") {
			t.Fatalf("call %d ran without its mount namespace: %q", i, text)
		}
		if strings.Contains(text, "no sandbox backend") {
			t.Errorf("call %d: a workdir that could not be entered is reported as a missing sandbox: %q", i, text)
		}
		seen[text]++
	}
	t.Logf("answers: %v", seen)
}

// TestHostMessageQueues: the host's POSIX message queues, which a
// private IPC namespace keeps from mq_open, are not reachable through
// the host's /dev/mqueue either. A queue opened there, even read-only,
// would let mq_receive take the host's messages off it. The mqueue
// mount lives in a namespace of the test's own.
func TestHostMessageQueues(t *testing.T) {
	requireABI(t, 1)
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	if _, err := os.Lstat("/dev/mqueue"); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir("/dev/mqueue", 0o755); err != nil {
			t.Skip(err)
		}
		t.Cleanup(func() { os.Remove("/dev/mqueue") })
	}
	for _, m := range mechanisms {
		for _, l := range launcherEnvs {
			t.Run(m.name+"/"+l.name, func(t *testing.T) {
				e := newConfinedEnv(t, "")
				e.extraEnv = append(append([]string{}, m.env...), l.env...)
				script := `set -e
mount -t mqueue mqueue /dev/mqueue
: > /dev/mqueue/bashcall-test
exec "$@"`
				c := e.cmd()
				c.Args = append([]string{"unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"}, c.Args...)
				c.Path, _ = exec.LookPath("unshare")
				c.Stdin = strings.NewReader(bashReq("cat /dev/mqueue/bashcall-test && echo host-queue-opened; ls /dev/mqueue; echo ran", ""))
				out, err := c.Output()
				if err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				text := decodeResponse(t, string(out)).text()
				if !strings.Contains(text, "ran") || strings.Contains(text, "host-queue-opened") || strings.Contains(text, "QSIZE") {
					t.Errorf("a confined command reading the host's message queue = %q", text)
				}
			})
		}
	}
}
