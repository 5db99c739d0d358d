package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startWaiting starts c with a pipe for stdin and returns once one of its
// threads blocks reading it: a -warm child has warmed up by then.
// Its stdout goes to a file, read by output once it ended, unless c has
// one already.
func startWaiting(t testing.TB, c *exec.Cmd) (io.WriteCloser, func() string) {
	t.Helper()
	r, stdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	c.Stdin = r
	if c.Stdout == nil {
		c.Stdout = out
	}
	err = c.Start()
	r.Close()
	out.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); c.Process.Kill(); c.Process.Wait() })
	reading := fmt.Sprintf("%d 0x0 ", unix.SYS_READ)
	waitFor(t, 10*time.Second, "bashcall reading its request", func() bool {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", c.Process.Pid))
		for _, task := range tasks {
			b, err := os.ReadFile(task)
			if errors.Is(err, fs.ErrPermission) {
				t.Skip("needs root: bashcall is not dumpable, so only root reads its /proc/PID/task/*/syscall")
			}
			if strings.HasPrefix(string(b), reading) {
				return true
			}
		}
		return false
	})
	output := func() string {
		b, _ := os.ReadFile(out.Name())
		return string(b)
	}
	return stdin, output
}

// answers hands c, waiting from startWaiting, a call of echo and checks
// that it answers it and exits 0.
func answers(t *testing.T, c *exec.Cmd, stdin io.WriteCloser, out func() string) {
	t.Helper()
	io.WriteString(stdin, bashReq("echo answered", ""))
	stdin.Close()
	if ws := waitExit(t, c.Process); !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("bashcall ended with %v, want exit status 0", ws)
	}
	if r := decodeResponse(t, out()); r.IsError || r.text() != "answered\n" {
		t.Errorf("response = %+v", r)
	}
}

// openLauncherMemfd reports whether pid holds the native launcher's memfd.
func openLauncherMemfd(pid int) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fd); strings.HasPrefix(l, "/memfd:bashcall-launcher") {
			return true
		}
	}
	return false
}

// TestWarmChild: a child started with -warm (a server's warm child) has
// readied the native launcher before its request comes (wherever
// Landlock is, whatever the config's mode), takes a SIGWINCH
// while it waits as a cold child does (ignored), and answers its call as
// a cold child does, unconfined and confined.
func TestWarmChild(t *testing.T) {
	envs := map[string]func(*testing.T) *testEnv{
		"unconfined": func(t *testing.T) *testEnv { return newTestEnv(t, "") },
		"confined":   func(t *testing.T) *testEnv { return newConfinedEnv(t, "") },
	}
	for name, env := range envs {
		t.Run(name, func(t *testing.T) {
			e := env(t)
			answers := map[bool]string{}
			for _, warm := range []bool{false, true} {
				var args []string
				if warm {
					args = []string{"-warm"}
				}
				c := e.cmd(args...)
				stdin, out := startWaiting(t, c)
				// Which mode the call runs in is known once it is in: a
				// warm child readies the launcher wherever Landlock is.
				_, nerr := nativeLauncher()
				wantMemfd := warm && sandboxSupport(os.Getenv).ABIErr == nil && nerr == nil && os.Getenv("BASHCALL_LAUNCHER") != "go"
				if got := openLauncherMemfd(c.Process.Pid); got != wantMemfd {
					t.Errorf("warm=%v: holds the launcher's memfd before its call: %v, want %v", warm, got, wantMemfd)
				}
				c.Process.Signal(syscall.SIGWINCH)
				io.WriteString(stdin, bashReq(`echo "answered $(id -u)"; touch made`, ""))
				stdin.Close()
				if ws := waitExit(t, c.Process); !ws.Exited() || ws.ExitStatus() != 0 {
					t.Fatalf("warm=%v: bashcall ended with %v", warm, ws)
				}
				r := decodeResponse(t, out())
				if r.IsError {
					t.Fatalf("warm=%v: %+v", warm, r)
				}
				answers[warm] = r.text()
				os.Remove(filepath.Join(e.workspace, "made"))
			}
			if want := "answered " + strconv.Itoa(os.Getuid()) + "\n"; answers[false] != want || answers[true] != want {
				t.Errorf("cold answered %q, warm answered %q; want %q from both", answers[false], answers[true], want)
			}
		})
	}
}

// TestWarmChildSignals: a warm child that waits for its request dies of
// SIGTERM as a cold one does (SIGINT and SIGTERM abort a call only once
// it is armed; signals.go), and a SIGINT its parent ignored stays ignored
// until the call, which is answered.
func TestWarmChildSignals(t *testing.T) {
	e := newTestEnv(t, "")
	c := e.cmd("-warm")
	startWaiting(t, c)
	c.Process.Signal(syscall.SIGTERM)
	if ws := waitExit(t, c.Process); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("a waiting warm child sent SIGTERM ended with %v, want killed by SIGTERM", ws)
	}

	bc := e.cmd("-warm")
	c = exec.Command("bash", append([]string{"-c", `trap "" INT; exec "$0" "$@"`}, bc.Args...)...)
	c.Dir, c.Env = bc.Dir, bc.Env
	stdin, out := startWaiting(t, c)
	for i := 0; i < 3; i++ {
		c.Process.Signal(syscall.SIGINT)
		time.Sleep(20 * time.Millisecond)
	}
	answers(t, c, stdin, out)
}

// BenchmarkWarmChild: what warming up saves a server's call. In each round
// a child started with -warm and one without (in alternating order) are
// each handed a call of true once they block reading their request; the
// time is from the request to the answer (the end of the child's stdout,
// which the servers answer on), medians over the rounds, and to the
// child's end.
//
//	go test -run '^$' -bench WarmChild -benchtime 100x
func BenchmarkWarmChild(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.name, func(b *testing.B) {
			e := mode.env(b)
			req := bashReq("true", "")
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			call := func(warm bool) (answered, ended float64) {
				c := exec.Command(e.bin, "-config", e.config, "-state-dir", e.state)
				if warm {
					c.Args = append(c.Args, "-warm")
				}
				c.Dir = e.work
				c.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(filepath.Dir(e.work), "cache"))
				r, w, err := os.Pipe()
				if err != nil {
					b.Fatal(err)
				}
				c.Stdout = w
				stdin, _ := startWaiting(b, c)
				w.Close()
				start := time.Now()
				io.WriteString(stdin, req)
				stdin.Close()
				out, _ := io.ReadAll(r)
				answer := time.Since(start)
				r.Close()
				st, err := c.Process.Wait()
				end := time.Since(start)
				if err != nil || !st.Success() || !strings.Contains(string(out), `"isError":false`) {
					b.Fatalf("warm=%v: %v %v: %s", warm, err, st, out)
				}
				return ms(answer), ms(end)
			}
			var cold, warm, coldEnd, warmEnd samples
			round := func(w bool) {
				a, e := call(w)
				if w {
					warm.add(a, 0)
					warmEnd.add(e, 0)
				} else {
					cold.add(a, 0)
					coldEnd.add(e, 0)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				round(i%2 != 0)
				round(i%2 == 0)
			}
			b.StopTimer()
			b.ReportMetric(cold.wall(), "cold-ms")
			b.ReportMetric(warm.wall(), "warm-ms")
			b.ReportMetric(warm.wall()/cold.wall(), "warm/cold")
			b.ReportMetric(median(diffs(cold.walls, warm.walls)), "saved-ms")
			b.ReportMetric(coldEnd.wall(), "cold-end-ms")
			b.ReportMetric(warmEnd.wall(), "warm-end-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestRequestWaiting: a warm child warms up only while its request has
// not come: data in its stdin, or the end of it, means the call is there.
func TestRequestWaiting(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if requestWaiting(r) {
		t.Error("an empty pipe counts as a request waiting")
	}
	w.WriteString("{")
	if !requestWaiting(r) {
		t.Error("a pipe holding data does not count as a request waiting")
	}
	r.Read(make([]byte, 1))
	w.Close()
	if !requestWaiting(r) {
		t.Error("a pipe at its end does not count as a request waiting")
	}
	if !requestWaiting(strings.NewReader("")) {
		t.Error("a reader that is no descriptor does not count as ready")
	}
}

// TestWarmChildMemfdNoexec: where the kernel refuses executable memfds
// (vm.memfd_noexec = 2, set here in a PID namespace of the test's own), a
// warm child does not try to make the launcher's (the kernel would log a
// warning for a call that may need no launcher), and still answers.
func TestWarmChildMemfdNoexec(t *testing.T) {
	if !inNamespace(t, "--pid", "--fork", "--mount-proc") {
		return
	}
	if err := os.WriteFile("/proc/sys/vm/memfd_noexec", []byte("2"), 0); err != nil {
		t.Skipf("cannot set vm.memfd_noexec in a PID namespace: %v (a kernel before 6.3)", err)
	}
	e := newTestEnv(t, "")
	const refused = "memfd_create() requires MFD_NOEXEC_SEAL"
	before, kmsgErr := kernelLogLines(refused)
	c := e.cmd("-warm")
	stdin, out := startWaiting(t, c)
	if after, _ := kernelLogLines(refused); kmsgErr == nil && after != before {
		t.Errorf("the warm child tried to make the launcher's memfd: the kernel logged %q %d times", refused, after-before)
	} else if kmsgErr != nil {
		t.Logf("not checked in the kernel log: %v", kmsgErr)
	}
	answers(t, c, stdin, out)
}

// kernelLogLines counts the records of the kernel log (/dev/kmsg) that
// hold s.
func kernelLogLines(s string) (int, error) {
	f, err := os.OpenFile("/dev/kmsg", os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	buf := make([]byte, 8192)
	for {
		k, err := syscall.Read(int(f.Fd()), buf)
		if err == syscall.EPIPE { // a record overwritten while read
			continue
		}
		if err != nil || k <= 0 {
			return n, nil
		}
		if strings.Contains(string(buf[:k]), s) {
			n++
		}
	}
}

// TestStdoutReleasedBeforeExit: a call's process lets go of its stdout
// once its response is written and what the response held is released,
// not at its exit: a server answers on the end of its child's stdout. At
// that end the response is whole, the spill file it names is no longer
// held (so the host sees a finished copy), and a process still running
// holds /dev/null as descriptor 1. The end comes before the exit in
// practice (the exit takes a fraction of a millisecond); the test needs
// to see that once.
func TestStdoutReleasedBeforeExit(t *testing.T) {
	e := newTestEnv(t, "max_output_bytes = 8\n")
	req := bashReq("echo 123456789", "")
	early, unreadable := 0, 0
	for i := 0; i < 50 && early == 0; i++ {
		c := e.cmd()
		c.Stdin = strings.NewReader(req)
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := io.ReadAll(out)
		fd1, ferr := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", c.Process.Pid))
		var got foregroundResult
		r := decodeResponse(t, string(line))
		if err := json.Unmarshal(r.StructuredContent, &got); err != nil || got.Stdout.SpillPath == "" {
			t.Fatalf("response at the end of stdout: %s (%v)", line, err)
		}
		f, err := os.Open(got.Stdout.SpillPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Errorf("the spill file is still held at the end of stdout: %v", err)
		}
		f.Close()
		if errors.Is(ferr, fs.ErrPermission) {
			unreadable++ // bashcall is not dumpable: only root reads its descriptors
		}
		if ferr == nil {
			early++
			if fd1 != os.DevNull {
				t.Errorf("descriptor 1 of the process after its stdout ended: %s, want %s", fd1, os.DevNull)
			}
		}
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	switch {
	case early > 0:
	case unreadable > 0:
		t.Skip("the responses were whole and their spill files released at the end of stdout; whether the process had exited by then needs root (bashcall is not dumpable)")
	default:
		t.Error("in 50 calls, stdout never ended before the process did")
	}
}

// TestWarmPoolSkipsKilledChild: a warm child killed while it waits (an
// OOM kill, say) is not handed a call once its main thread is a zombie,
// although its other threads may hold its stdin open for milliseconds
// more: the call goes to a child started for it, and is answered.
func TestWarmPoolSkipsKilledChild(t *testing.T) {
	e := newTestEnv(t, "[sandbox]\nmode = \"danger-full-access\"\n")
	env := append(os.Environ(), "BASHCALL_TEST_MAIN=1", "XDG_CACHE_HOME="+filepath.Join(testBase, "cache"))
	for i := 0; i < 10; i++ {
		p := newWarmPool(1, func(warm bool) (*warmChild, error) {
			args := []string{"-config", e.config, "-state-dir", e.stateDir}
			if warm {
				args = append(args, "-warm")
			}
			return startChild(args, env, nil, nil)
		})
		p.refill()
		p.spawning.Wait()
		time.Sleep(50 * time.Millisecond) // into its wait for a request
		p.mu.Lock()
		c := p.idle[0]
		p.mu.Unlock()
		pid := c.cmd.Process.Pid
		start, _ := procStartTime(pid)
		syscall.Kill(pid, syscall.SIGKILL)
		for deadline := time.Now().Add(5 * time.Second); processAlive(pid, start); {
			if time.Now().After(deadline) {
				t.Fatal("the killed child did not die")
			}
		}
		got, err := p.take()
		if err != nil {
			t.Fatal(err)
		}
		if line, ok := got.ask([]byte(bashReq("echo answered", ""))); !ok {
			t.Errorf("round %d: the call went to the killed child: %q, %v", i, line, got.waitErr)
		}
		p.close()
	}
}
