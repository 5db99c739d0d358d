package main

// Benchmarks that compare bashcall side by side with what it replaces, in
// one run, and report ratios. They build the real binary (no test
// instrumentation). Run them with bench/run, or:
//
//	go test -run '^$' -bench . -benchtime 200x

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	benchOnce sync.Once
	benchBin  string
	benchErr  error
)

// benchBinary builds bashcall once, as a user would.
func benchBinary(b *testing.B) string {
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp(testBase, "bin-")
		if err != nil {
			benchErr = err
			return
		}
		benchBin = filepath.Join(dir, "bashcall")
		out, err := exec.Command("go", "build", "-o", benchBin, ".").CombinedOutput()
		if err != nil {
			benchErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchBin
}

// benchEnv is a state dir, workspace and config for the built binary.
type benchEnv struct {
	b                        *testing.B
	bin, config, state, work string
	env                      []string // added to the environment
}

// benchModes are the two ways a server's call is measured: unconfined,
// and sandboxed where Landlock is.
type benchMode struct{ name, config string }

var benchModes = []benchMode{
	{"unconfined", "[sandbox]\nmode = \"danger-full-access\"\n"},
	{"sandboxed", ""},
}

// env is a benchEnv with the mode's config, skipping a sandboxed mode
// the kernel cannot confine.
func (m benchMode) env(b *testing.B) *benchEnv {
	b.Helper()
	if m.config == "" && sandboxSupport(os.Getenv).ABIErr != nil {
		b.Skip("needs Landlock")
	}
	return newBenchEnv(b, m.config)
}

func newBenchEnv(b *testing.B, config string) *benchEnv {
	dir, err := os.MkdirTemp(testBase, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	e := &benchEnv{b: b, bin: benchBinary(b), config: filepath.Join(dir, "config.toml"),
		state: filepath.Join(dir, "state"), work: filepath.Join(dir, "ws")}
	os.Mkdir(e.work, 0o755)
	os.WriteFile(e.config, []byte(config), 0o600)
	return e
}

// run runs the binary on a request and returns its stdout and rusage.
func (e *benchEnv) run(req string, args ...string) (string, *syscall.Rusage) {
	c := exec.Command(e.bin, append([]string{"-config", e.config, "-state-dir", e.state}, args...)...)
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		c.Args = append([]string{e.bin, args[0], "-config", e.config, "-state-dir", e.state}, args[1:]...)
	}
	c.Dir = e.work
	c.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(filepath.Dir(e.work), "cache"))
	c.Env = append(c.Env, e.env...)
	c.Stdin = strings.NewReader(req)
	out, err := c.Output()
	if err != nil {
		e.b.Fatalf("%s: %v\n%s", req, err, out)
	}
	return string(out), c.ProcessState.SysUsage().(*syscall.Rusage)
}

// timeIt runs f and returns how long it took.
func timeIt(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func runCmd(b *testing.B, name string, args ...string) {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func ms(d time.Duration, n int) float64 { return float64(d) / float64(n) / 1e6 }

// floorSource is the least a Go program can do to run bash -c true and
// collect its output: the floor under any Go supervisor on this machine.
const floorSource = `package main

import (
	"io"
	"os/exec"
)

func main() {
	c := exec.Command("bash", "-c", "true")
	out, _ := c.StdoutPipe()
	c.Start()
	io.ReadAll(out)
	c.Wait()
}
`

// buildFloor builds floorSource.
func buildFloor(b *testing.B) string {
	dir, err := os.MkdirTemp(testBase, "floor-")
	if err != nil {
		b.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(floorSource), 0o600)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module floor\n\ngo 1.22\n"), 0o600)
	c := exec.Command("go", "build", "-o", "floor", ".")
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("building the floor program: %v\n%s", err, out)
	}
	return filepath.Join(dir, "floor")
}

// BenchmarkCallOverhead: bashcall on true, unconfined and sandboxed,
// against bash -c true and bwrap, interleaved so that each sees the same
// machine; and against a Go program that only spawns bash, the floor for
// any Go supervisor on this machine.
// bwrapLine is the bubblewrap line that a confined call is held against:
// bash -c true as a confined call runs it, with / read-only, /dev and a
// writable /tmp.
var bwrapLine = []string{"--ro-bind", "/", "/", "--dev", "/dev", "--bind", "/tmp", "/tmp", "bash", "-c", "true"}

func BenchmarkCallOverhead(b *testing.B) {
	full := newBenchEnv(b, "[sandbox]\nmode = \"danger-full-access\"\n")
	boxed := newBenchEnv(b, "")
	goLaunched := newBenchEnv(b, "")
	goLaunched.env = []string{"BASHCALL_LAUNCHER=go"}
	req := bashReq("true", "")
	bwrap, _ := exec.LookPath("bwrap")
	floor := buildFloor(b)
	var tBash, tFloor, tFull, tBoxed, tGoLaunched, tBwrap time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tBash += timeIt(func() { runCmd(b, "bash", "-c", "true") })
		tFloor += timeIt(func() { runCmd(b, floor) })
		tFull += timeIt(func() { full.run(req) })
		tBoxed += timeIt(func() { boxed.run(req) })
		tGoLaunched += timeIt(func() { goLaunched.run(req) })
		if bwrap != "" {
			tBwrap += timeIt(func() { runCmd(b, bwrap, bwrapLine...) })
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(tBash, b.N), "bash-ms/op")
	b.ReportMetric(ms(tFloor, b.N), "go-floor-ms/op")
	b.ReportMetric(ms(tFull-tFloor, b.N), "unconfined-over-floor-ms")
	b.ReportMetric(ms(tFull, b.N), "unconfined-ms/op")
	b.ReportMetric(ms(tBoxed, b.N), "sandboxed-ms/op")
	b.ReportMetric(float64(tFull)/float64(tBash), "unconfined/bash")
	b.ReportMetric(ms(tBoxed-tFull, b.N), "landlock-adds-ms")
	b.ReportMetric(ms(tGoLaunched-tFull, b.N), "landlock-adds-go-launcher-ms")
	if bwrap != "" {
		b.ReportMetric(ms(tBwrap, b.N), "bwrap-ms/op")
		b.ReportMetric(float64(tBoxed)/float64(tBwrap), "sandboxed/bwrap")
	} else {
		b.Log("bwrap is not installed (bench/run installs Debian's bubblewrap); no bwrap column")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkUnconfinedCall: bashcall's own cost for an unconfined
// foreground call on true, as medians (of wall time and of CPU time, the
// process and its children) over interleaved runs, against bash -c true
// and the Go floor. With BASHCALL_BENCH_BASE naming a git revision, the
// binary built from that revision runs in the same rounds: a change is
// measured side by side with what it changes, on the same machine load,
// and saved-ms is the median of the rounds' differences. Both binaries are
// copied to new files every 10 rounds (freshCopy).
//
//	BASHCALL_BENCH_BASE=HEAD~1 go test -run '^$' -bench UnconfinedCall -benchtime 500x
func BenchmarkUnconfinedCall(b *testing.B) {
	benchCall(b, "[sandbox]\nmode = \"danger-full-access\"\n", "unconfined")
}

// BenchmarkSandboxedCall is BenchmarkUnconfinedCall for a call confined
// as configured by default (workspace-write), with the native launcher
// where there is one.
//
//	BASHCALL_BENCH_BASE=HEAD~1 go test -run '^$' -bench SandboxedCall -benchtime 500x
func BenchmarkSandboxedCall(b *testing.B) {
	requireABI(b, 1)
	benchCall(b, "", "sandboxed")
}

func benchCall(b *testing.B, config, name string) {
	full := newBenchEnv(b, config)
	req := bashReq("true", "")
	floor := buildFloor(b)
	var base *benchEnv
	if rev := os.Getenv("BASHCALL_BENCH_BASE"); rev != "" {
		base = newBenchEnv(b, config)
		base.bin = buildRevision(b, rev)
	}
	var bash, fl, cur, old samples
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%10 == 0 {
			b.StopTimer()
			full.bin = freshCopy(b, full.bin)
			if base != nil {
				base.bin = freshCopy(b, base.bin)
			}
			b.StartTimer()
		}
		bash.add(timeCmd(b, exec.Command("bash", "-c", "true")))
		fl.add(timeCmd(b, exec.Command(floor)))
		if base != nil && i%2 == 1 {
			old.add(base.timeRun(req)) // half the rounds run it first
		}
		cur.add(full.timeRun(req))
		if base != nil && i%2 == 0 {
			old.add(base.timeRun(req))
		}
	}
	b.StopTimer()
	b.ReportMetric(bash.wall(), "bash-ms")
	b.ReportMetric(fl.wall(), "go-floor-ms")
	b.ReportMetric(cur.wall(), name+"-ms")
	b.ReportMetric(cur.wall()/bash.wall(), name+"/bash")
	b.ReportMetric(cur.wall()-fl.wall(), "over-floor-ms")
	b.ReportMetric(cur.cpu(), name+"-cpu-ms")
	b.ReportMetric(fl.cpu(), "go-floor-cpu-ms")
	if base != nil {
		b.ReportMetric(old.wall(), "base-ms")
		b.ReportMetric(old.wall()/bash.wall(), "base/bash")
		b.ReportMetric(old.cpu(), "base-cpu-ms")
		b.ReportMetric(median(diffs(old.walls, cur.walls)), "saved-ms")
		b.ReportMetric(median(diffs(old.cpus, cur.cpus)), "saved-cpu-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// freshCopy rewrites the binary bin into a new file and returns its path:
// where the page cache happens to hold a binary moves a call by up to half
// a millisecond on a virtual machine, so every binary is placed afresh
// every few rounds rather than once for the whole run.
func freshCopy(b *testing.B, bin string) string {
	data, err := os.ReadFile(bin)
	if err != nil {
		b.Fatal(err)
	}
	next := strings.TrimSuffix(bin, ".1") + ".1"
	if next == bin {
		next = strings.TrimSuffix(bin, ".1")
	}
	if err := os.WriteFile(next+".tmp", data, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(next+".tmp", next); err != nil {
		b.Fatal(err)
	}
	return next
}

// samples are the wall and CPU times of repeated runs, in ms.
type samples struct{ walls, cpus []float64 }

func (s *samples) add(wall, cpu float64) {
	s.walls, s.cpus = append(s.walls, wall), append(s.cpus, cpu)
}

func (s *samples) wall() float64 { return median(s.walls) }
func (s *samples) cpu() float64  { return median(s.cpus) }

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// diffs are a[i]-b[i]: a round's difference, whatever the load was then.
func diffs(a, b []float64) []float64 {
	d := make([]float64, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return d
}

// timeCmd runs c and returns its wall time and the CPU time of it and its
// children, in ms.
func timeCmd(b *testing.B, c *exec.Cmd) (wall, cpu float64) {
	start := time.Now()
	out, err := c.Output()
	wall = float64(time.Since(start)) / 1e6
	if err != nil {
		b.Fatalf("%v: %v\n%s", c.Args, err, out)
	}
	ru := c.ProcessState.SysUsage().(*syscall.Rusage)
	return wall, float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

// timeRun is run, timed with timeCmd.
func (e *benchEnv) timeRun(req string) (wall, cpu float64) {
	c := exec.Command(e.bin, "-config", e.config, "-state-dir", e.state)
	c.Dir = e.work
	c.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(filepath.Dir(e.work), "cache"))
	c.Stdin = strings.NewReader(req)
	return timeCmd(e.b, c)
}

// buildRevision builds bashcall as it was at the git revision rev.
func buildRevision(b *testing.B, rev string) string {
	dir, err := os.MkdirTemp(testBase, "rev-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	tar := filepath.Join(dir, "src.tar")
	for _, argv := range [][]string{{"git", "archive", "-o", tar, rev}, {"tar", "-x", "-C", dir, "-f", tar}} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", argv, err, out)
		}
	}
	c := exec.Command("go", "build", "-o", "bashcall", ".")
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("building %s: %v\n%s", rev, err, out)
	}
	return filepath.Join(dir, "bashcall")
}

// BenchmarkThroughput streams 1 GB through bashcall against a pipe into
// cat, and reports bashcall's peak RSS against an empty call's.
func BenchmarkThroughput(b *testing.B) {
	e := newBenchEnv(b, "[sandbox]\nmode = \"danger-full-access\"\n")
	const size = 1 << 30
	produce := fmt.Sprintf("head -c %d /dev/zero", size)
	empty := e.peakRSS(bashReq("true", ""))
	// Which of the two runs first, and on which core each side of a
	// pipe lands, moves a round by up to half here (the same 1 GB call
	// took 351 to 761 ms in one series): the ratio is the median of the
	// rounds', which alternate.
	var pipe, call, ratio []float64
	var peak int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var tPipe, tCall time.Duration
		runPipe := func() { tPipe = timeIt(func() { runCmd(b, "bash", "-c", produce+" | cat >/dev/null") }) }
		runCall := func() { tCall = timeIt(func() { e.run(bashReq(produce, "")) }) }
		if i%2 == 0 {
			runPipe()
			runCall()
		} else {
			runCall()
			runPipe()
		}
		pipe, call = append(pipe, float64(size)/tPipe.Seconds()/1e6), append(call, float64(size)/tCall.Seconds()/1e6)
		ratio = append(ratio, tPipe.Seconds()/tCall.Seconds())
	}
	b.StopTimer()
	peak = e.peakRSS(bashReq(produce, ""))
	b.ReportMetric(median(pipe), "pipe-MB/s")
	b.ReportMetric(median(call), "bashcall-MB/s")
	b.ReportMetric(median(ratio), "throughput-ratio")
	b.ReportMetric(float64(empty)/1024, "empty-call-peak-MiB")
	b.ReportMetric(float64(peak)/1024, "1GB-call-peak-MiB")
	b.ReportMetric(0, "ns/op")
}

// peakRSS runs the binary on a request and returns its peak resident set
// in KiB (VmHWM, read every millisecond while it runs). Not the rusage of
// wait4: a child started by vfork, as Go starts one, carries the maximum
// resident set of its parent's memory, which it shared until its exec, so
// that figure is the benchmark's own.
func (e *benchEnv) peakRSS(req string) int64 {
	c := exec.Command(e.bin, "-config", e.config, "-state-dir", e.state)
	c.Dir = e.work
	c.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(filepath.Dir(e.work), "cache"))
	c.Stdin = strings.NewReader(req)
	if err := c.Start(); err != nil {
		e.b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var peak int64
	for {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Process.Pid)); err == nil {
			if _, v, ok := strings.Cut(string(b), "VmHWM:"); ok {
				kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.Fields(v)[0], "kB"), 10, 64)
				peak = max(peak, kib)
			}
		}
		select {
		case err := <-done:
			if err != nil {
				e.b.Fatalf("%s: %v", req, err)
			}
			return peak
		case <-time.After(time.Millisecond):
		}
	}
}

// BenchmarkBackground: starting a background task against a foreground
// true, and a bash_output finding nothing new on a task that wrote 100 MB
// against one on an empty task (a read costs O(new bytes)).
func BenchmarkBackground(b *testing.B) {
	e := newBenchEnv(b, "[sandbox]\nmode = \"danger-full-access\"\n[background]\nmax_tasks_per_session = 100000\n")
	big := startTaskID(b, e, "head -c 104857600 /dev/zero; sleep 3600")
	empty := startTaskID(b, e, "sleep 3600")
	defer e.run(`{"name":"bash_kill","arguments":{"task_id":"` + big + `"}}`)
	defer e.run(`{"name":"bash_kill","arguments":{"task_id":"` + empty + `"}}`)
	for {
		out, _ := e.run(`{"name":"bash_output","arguments":{"task_id":"` + big + `"}}`)
		if f, err := os.Open(filepath.Join(e.state, "tasks", big, "stdout.tail")); err == nil {
			total, _ := readTailHeader(f)
			f.Close()
			if total == 104857600 && strings.Contains(out, statusLine(taskStatus{State: stateRunning})) {
				e.run(`{"name":"bash_output","arguments":{"task_id":"` + big + `"}}`)
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	var tFg, tStart, tReadBig, tReadEmpty time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tFg += timeIt(func() { e.run(bashReq("true", "")) })
		tStart += timeIt(func() { e.run(bashReq("true", `"run_in_background":true`)) })
	}
	time.Sleep(100 * time.Millisecond) // let the last started task finish
	for i := 0; i < b.N; i++ {
		tReadBig += timeIt(func() { e.run(`{"name":"bash_output","arguments":{"task_id":"` + big + `"}}`) })
		tReadEmpty += timeIt(func() { e.run(`{"name":"bash_output","arguments":{"task_id":"` + empty + `"}}`) })
	}
	b.StopTimer()
	b.ReportMetric(ms(tFg, b.N), "foreground-ms/op")
	b.ReportMetric(ms(tStart, b.N), "start-ms/op")
	b.ReportMetric(float64(tStart)/float64(tFg), "start/foreground")
	b.ReportMetric(ms(tReadBig, b.N), "read-100MB-task-ms/op")
	b.ReportMetric(ms(tReadEmpty, b.N), "read-empty-task-ms/op")
	b.ReportMetric(float64(tReadBig)/float64(tReadEmpty), "read-ratio")
	b.ReportMetric(0, "ns/op")
}

func startTaskID(b *testing.B, e *benchEnv, command string) string {
	out, _ := e.run(bashReq(command, `"run_in_background":true`))
	i := strings.Index(out, textStarted(""))
	if i < 0 {
		b.Fatalf("start: %s", out)
	}
	id := out[i+len(textStarted("")):]
	return id[:strings.IndexByte(id, '"')]
}

// BenchmarkSpool: calls per second through the spool with 1, 2 and 4
// workers against one bashcall process per call on stdin.
func BenchmarkSpool(b *testing.B) {
	e := newBenchEnv(b, "[sandbox]\nmode = \"danger-full-access\"\n")
	calls := 100 * b.N
	req := bashReq("true", "")
	stdin := timeIt(func() {
		for i := 0; i < calls; i++ {
			e.run(req)
		}
	})
	b.ReportMetric(float64(calls)/stdin.Seconds(), "stdin-calls/s")
	for _, workers := range []int{1, 2, 4} {
		dir := filepath.Join(e.work, fmt.Sprintf("spool-%d", workers))
		c := exec.Command(e.bin, "serve", "-config", e.config, "-state-dir", e.state, "-spool", dir, "-workers", fmt.Sprint(workers))
		c.Stderr = new(bytes.Buffer)
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		took := timeIt(func() {
			for i := 0; i < calls; i++ {
				name := fmt.Sprintf("c%d.json", i)
				os.WriteFile(filepath.Join(dir, "tmp", name), []byte(req), 0o600)
				os.Rename(filepath.Join(dir, "tmp", name), filepath.Join(dir, "new", name))
			}
			for i := 0; i < calls; i++ {
				for {
					if _, err := os.Stat(filepath.Join(dir, "out", fmt.Sprintf("c%d.json", i))); err == nil {
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
		})
		c.Process.Signal(syscall.SIGTERM)
		c.Wait()
		b.ReportMetric(float64(calls)/took.Seconds(), fmt.Sprintf("spool-%dw-calls/s", workers))
		b.ReportMetric(stdin.Seconds()/took.Seconds(), fmt.Sprintf("spool-%dw/stdin", workers))
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkReadConfinement: the launcher confining bash -c true with the
// read grant built around the default deny_read list and a state dir, in
// a home of 200 entries, against the same launch with reads open, and
// against no launcher at all. The difference is what read confinement
// costs a call.
func BenchmarkReadConfinement(b *testing.B) {
	if err := sandboxSupport(os.Getenv).ABIErr; err != nil {
		b.Skip(err)
	}
	home, err := os.MkdirTemp(testBase, "home-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(home)
	for i := 0; i < 200; i++ {
		os.WriteFile(filepath.Join(home, fmt.Sprintf("entry-%03d", i)), nil, 0o644)
	}
	for _, d := range []string{".ssh", ".aws", ".config/gh", ".config/gcloud", ".local/state/bashcall/spill"} {
		os.MkdirAll(filepath.Join(home, d), 0o700)
	}
	denied := deniedPaths(defaultDenyRead, home, filepath.Join(home, ".local/state/bashcall"))
	bash, _ := exec.LookPath("bash")
	base := []string{selfExe(), launcherArg, "-w", "/dev/null"}
	var withReads []string
	for _, d := range denied {
		withReads = append(withReads, "-deny", d)
	}
	withReads = append(withReads, "-rf", filepath.Join(home, ".local/state/bashcall/spill"))
	run := func(argv []string, launcher bool) {
		var out, errb bytes.Buffer
		res, err := runCommand(&runSpec{Argv: argv, Dir: "/", Env: os.Environ(), Stdout: &out, Stderr: &errb,
			Grace: time.Second, Launcher: launcher})
		if err != nil || res.RunnerFailure != "" || res.ExitCode != 0 {
			b.Fatalf("%v: %v %+v %s", argv, err, res, errb.String())
		}
	}
	cmd := []string{"--", bash, "-c", "true"}
	var tPlain, tOpen, tConfined time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tPlain += timeIt(func() { run([]string{bash, "-c", "true"}, false) })
		tOpen += timeIt(func() { run(append(append([]string{}, base...), cmd...), true) })
		tConfined += timeIt(func() { run(append(append(append([]string{}, base...), withReads...), cmd...), true) })
	}
	b.StopTimer()
	b.ReportMetric(ms(tPlain, b.N), "bash-ms/op")
	b.ReportMetric(ms(tOpen, b.N), "launcher-reads-open-ms/op")
	b.ReportMetric(ms(tConfined, b.N), "launcher-reads-confined-ms/op")
	b.ReportMetric(ms(tConfined-tOpen, b.N), "read-confinement-adds-ms")
	b.ReportMetric(float64(len(planReadRules(readGrant{Denied: denied}, accessRead, osListDir))), "read-rules")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkGitGuard: what protecting a fresh repository's hooks and config
// costs a confined call under each mechanism: recording before the call
// and checking (restoring) after it, in process.
func BenchmarkGitGuard(b *testing.B) {
	fresh := b.TempDir()
	if out, err := exec.Command("git", "init", "-q", fresh).CombinedOutput(); err != nil {
		b.Skipf("git init: %v %s", err, out)
	}
	// A repository of 2000 files in its index (about 150 KiB of it), and
	// two submodules: what reading the index for gitlinks costs.
	files := b.TempDir()
	script := `git init -q && mkdir -p d && for i in $(seq 1 2000); do echo $i > d/f$i; done && git add -A &&
h=$(git hash-object -w d/f1) && git update-index --add --cacheinfo 160000,$h,sub1 --cacheinfo 160000,$h,sub2`
	c := exec.Command("bash", "-c", script)
	c.Dir = files
	if out, err := c.CombinedOutput(); err != nil {
		b.Skipf("making a repository: %v %s", err, out)
	}
	for _, run := range []struct {
		name, ws string
		full     bool
	}{{"namespace", fresh, false}, {"snapshot", fresh, true}, {"namespace/files", files, false}, {"snapshot/files", files, true}} {
		ws, full := run.ws, run.full
		b.Run(run.name, func(b *testing.B) {
			var entries int
			for i := 0; i < b.N; i++ {
				g, err := planGitGuard([]string{ws}, nil, nil, nil, full)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := g.restore(); err != nil {
					b.Fatal(err)
				}
				entries = len(g.Entries)
			}
			b.ReportMetric(float64(entries), "entries")
		})
	}
}

// BenchmarkServerLatency: one call of true at a time through a running
// serve (one worker) and a running bashcall mcp, against bash -c true and
// a one-shot call on stdin, interleaved; unconfined and sandboxed.
func BenchmarkServerLatency(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.name, func(b *testing.B) {
			e := mode.env(b)
			req := bashReq("true", "")
			spool := filepath.Join(filepath.Dir(e.work), "spool") // not in the workspace: a control path
			serve := exec.Command(e.bin, "serve", "-config", e.config, "-state-dir", e.state, "-spool", spool, "-workers", "1")
			serve.Dir = e.work
			if err := serve.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
			mcp := exec.Command(e.bin, "mcp", "-config", e.config, "-state-dir", e.state, "-workspace", e.work)
			in, _ := mcp.StdinPipe()
			outPipe, _ := mcp.StdoutPipe()
			if err := mcp.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { in.Close(); mcp.Wait() }()
			out := bufio.NewReader(outPipe)
			rpc := func(line string) string {
				io.WriteString(in, line+"\n")
				resp, err := out.ReadString('\n')
				if err != nil {
					b.Fatal(err)
				}
				return resp
			}
			rpc(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
			io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			for {
				if _, err := os.Stat(filepath.Join(spool, "out")); err == nil {
					break
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // both servers' first processes start
			var tBash, tStdin, tSpool, tMCP time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tBash += timeIt(func() { runCmd(b, "bash", "-c", "true") })
				tStdin += timeIt(func() { e.run(req) })
				name := fmt.Sprintf("c%d.json", i)
				tSpool += timeIt(func() {
					os.WriteFile(filepath.Join(spool, "tmp", name), []byte(req), 0o600)
					os.Rename(filepath.Join(spool, "tmp", name), filepath.Join(spool, "new", name))
					for {
						if out, err := os.ReadFile(filepath.Join(spool, "out", name)); err == nil {
							if !strings.Contains(string(out), `"isError":false`) {
								b.Fatalf("spool answered: %s", out)
							}
							return
						}
						time.Sleep(100 * time.Microsecond)
					}
				})
				// serve starts its next child now: let it wait before
				// mcp is timed, or the two compete for the cores.
				time.Sleep(50 * time.Millisecond)
				tMCP += timeIt(func() {
					resp := rpc(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"bash","arguments":{"command":"true","description":"bench"}}}`, i+1))
					if !strings.Contains(resp, `"isError":false`) {
						b.Fatalf("mcp answered: %s", resp)
					}
				})
				time.Sleep(50 * time.Millisecond) // a call at a time: the servers' next processes start
			}
			b.StopTimer()
			b.ReportMetric(ms(tBash, b.N), "bash-ms/op")
			b.ReportMetric(ms(tStdin, b.N), "stdin-ms/op")
			b.ReportMetric(ms(tSpool, b.N), "spool-ms/op")
			b.ReportMetric(ms(tMCP, b.N), "mcp-ms/op")
			b.ReportMetric(float64(tStdin)/float64(tBash), "stdin/bash")
			b.ReportMetric(float64(tSpool)/float64(tBash), "spool/bash")
			b.ReportMetric(float64(tMCP)/float64(tBash), "mcp/bash")
			b.ReportMetric(0, "ns/op")
		})
	}
}
