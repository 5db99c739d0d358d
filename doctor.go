package main

// bashcall doctor: what this host can and cannot give a call (PROTOCOL.md
// section 10), one line per check: ok, missing (a call that needs it
// fails) or degraded (calls run, with less than the contract promises),
// and the fix. It exits 0 only when a call in the configured default mode
// can run here.
//
// The sandbox lines come from the same probe and the same words as
// version (sandboxSupport, support.report); doctor adds what version does
// not look at: the shell, /dev/null, /proc, the state dir, PID 1.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Check statuses.
const (
	statusOK       = "ok"
	statusMissing  = "missing"
	statusDegraded = "degraded"
)

// check is one line of doctor.
type check struct {
	name, status, detail, fix string
	// required says a call in the default mode cannot run without it.
	required bool
}

func (c check) String() string {
	s := fmt.Sprintf("%-8s %s: %s", c.status, c.name, c.detail)
	if c.fix != "" && c.status != statusOK {
		s += "; fix: " + c.fix
	}
	return s
}

// hostFacts is what doctor finds out about this host.
type hostFacts struct {
	mode        string // the configured default sandbox mode
	config      string // the config file in use, "" for the built-in defaults
	configErr   error
	shell       string
	shellErr    error
	devNull     error
	processes   error // the limit on the user's processes leaves no room (roomForThreads)
	proc        error // /proc is not mounted
	reexec      error // bashcall cannot re-execute itself
	stateDir    string
	stateErr    error
	writableErr error // a default call's writable set would expose a control path
	sup         support
	pid1        bool
	network     string // [sandbox] network
	denyRead    int    // how many [sandbox] deny_read paths
}

// runDoctor prints the checks and fails unless a default call can run.
func runDoctor(args, environ []string, stdout, stderr io.Writer) error {
	var c commonFlags
	if err := parseFlags(newFlagSet("doctor", stderr, &c), args, 0); err != nil {
		return err
	}
	checks := doctorChecks(gatherFacts(&c, environ))
	if _, err := io.WriteString(stdout, renderDoctor(checks)); err != nil {
		return err
	}
	var missing []string
	for _, ch := range checks {
		if ch.required && ch.status == statusMissing {
			missing = append(missing, ch.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("a call in the default mode cannot run here: missing %s", strings.Join(missing, ", "))
	}
	return nil
}

// renderDoctor is doctor's output: the checks, then the verdict, a
// check line of its own.
func renderDoctor(checks []check) string {
	var b strings.Builder
	verdict := check{name: "default call", status: statusOK, detail: "a call in the default mode can run here"}
	var missing []string
	for _, ch := range checks {
		fmt.Fprintln(&b, ch)
		if ch.required && ch.status == statusMissing {
			missing = append(missing, ch.name)
		}
	}
	if missing != nil {
		verdict.status, verdict.detail = statusMissing, "a call in the default mode cannot run here"
		verdict.fix = "see above: " + strings.Join(missing, ", ")
	}
	fmt.Fprintln(&b, verdict)
	return b.String()
}

// gatherFacts probes this host as a call in the default mode would use it.
func gatherFacts(c *commonFlags, environ []string) *hostFacts {
	inv := newInvocation(environ)
	f := &hostFacts{sup: sandboxSupport(inv.getenv), pid1: os.Getpid() == 1, reexec: reexecCheck()}
	f.config = configPath(c.config, inv.getenv)
	inv.cfg, f.configErr = loadConfig(f.config)
	if f.configErr != nil {
		inv.cfg, _ = loadConfig("") // go on with the defaults
	}
	f.mode = inv.cfg.Sandbox.Mode
	f.network, f.denyRead = inv.cfg.Sandbox.Network, len(inv.cfg.Sandbox.DenyRead)
	f.shell, f.shellErr = lookShell(inv.cfg.Shell, inv.getenv("PATH"))
	f.devNull = checkDevNull()
	f.processes = roomForThreads()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		f.proc = err
	}
	dir, err := stateDirPath(c.stateDir, &inv.cfg, inv.getenv)
	given := dir
	if err == nil {
		dir, err = openStateDir(dir)
	}
	f.stateDir, f.stateErr = dir, err
	if err == nil && f.sup.ABIErr == nil && f.sup.ABI >= 1 && f.mode != modeFullAccess {
		// The workspace of a session differs per session; /tmp stands in
		// for it, as it is in every workspace-write writable set anyway.
		inv.stateDir = dir
		inv.protectPaths(given)
		inv.others, _ = ownDirs(inv.getenv, inv.stateDir)
		_, f.writableErr = planSandbox(f.mode, canonicalOr("/tmp"), inv.cfg.Sandbox.WritableRoots, nil, inv.controlPaths(), f.sup.ABI, nil)
	}
	return f
}

// checkDevNull requires a writable character device at /dev/null: every
// command's stdin, and a confined command's only writable file in
// read-only mode.
func checkDevNull() error {
	fd, err := unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return errors.New("not a character device")
	}
	return nil
}

// doctorChecks turns the facts into checks, in a fixed order.
func doctorChecks(f *hostFacts) []check {
	confined := f.mode != modeFullAccess
	checks := []check{
		configCheck(f),
		shellCheck(f),
		devNullCheck(f),
		processesCheck(f),
		procCheck(f, confined),
		stateDirCheck(f),
		writableCheck(f),
	}
	checks = append(checks, landlockChecks(f, confined)...)
	checks = append(checks, pid1Check(f))
	return append(checks, privilegeChecks(f)...)
}

func configCheck(f *hostFacts) check {
	c := check{name: "config", status: statusOK, detail: "built-in defaults; default mode " + f.mode, required: true}
	if f.config != "" {
		c.detail = fmt.Sprintf("%s; default mode %s", f.config, f.mode)
	}
	if f.configErr != nil {
		c.status, c.detail, c.fix = statusMissing, f.configErr.Error(), "correct the file (config.toml.example documents every key)"
	}
	return c
}

func shellCheck(f *hostFacts) check {
	if f.shellErr != nil {
		var te *toolError
		msg := f.shellErr.Error()
		if errors.As(f.shellErr, &te) {
			msg = te.msg
		}
		return check{name: "shell", status: statusMissing, detail: msg, required: true,
			fix: "install bash, or set shell in the config to the path of a bash"}
	}
	return check{name: "shell", status: statusOK, detail: f.shell, required: true}
}

func devNullCheck(f *hostFacts) check {
	if f.devNull != nil {
		return check{name: "/dev/null", status: statusMissing, detail: f.devNull.Error(), required: true,
			fix: "create it (mknod -m 666 /dev/null c 1 3) or bind-mount the host's"}
	}
	return check{name: "/dev/null", status: statusOK, detail: "a writable character device", required: true}
}

// processesCheck: under a limit on the user's processes too low for its
// threads, bashcall refuses every call (roomForThreads).
func processesCheck(f *hostFacts) check {
	if f.processes != nil {
		return check{name: "processes", status: statusMissing, detail: f.processes.Error(), required: true,
			fix: fmt.Sprintf("raise it to %d or more (ulimit -u, LimitNPROC= of a systemd unit, --ulimit nproc= of docker run)", minProcesses)}
	}
	return check{name: "processes", status: statusOK, detail: "the limit on the user's processes leaves room for bashcall's threads", required: true}
}

// procCheck: bashcall re-executes itself through /proc/self/exe for the
// launcher and each task's supervisor, and finds and stops a command's
// processes through /proc.
func procCheck(f *hostFacts, confined bool) check {
	c := check{name: "/proc", status: statusOK, required: confined,
		detail: "mounted; bashcall re-executes itself through " + selfExe()}
	switch {
	case f.reexec != nil:
		c.status = statusMissing
		c.detail = fmt.Sprintf("cannot re-execute bashcall through %s (%v): confined calls and background tasks cannot start", selfExe(), errors.Unwrap(f.reexec))
	case f.proc != nil:
		c.status, c.detail = statusMissing, "not mounted: escaped processes and dead supervisors cannot be found"
	}
	if c.status != statusOK {
		c.fix = "mount -t proc proc /proc (in a container: give it /proc)"
	}
	return c
}

func stateDirCheck(f *hostFacts) check {
	if f.stateErr != nil {
		fix := "choose another with -state-dir, $BASHCALL_STATE_DIR or state_dir"
		var he *hintError
		if errors.As(f.stateErr, &he) {
			fix = he.hint
		}
		return check{name: "state dir", status: statusMissing, detail: f.stateErr.Error(), fix: fix, required: true}
	}
	return check{name: "state dir", status: statusOK, detail: f.stateDir + ", private", required: true}
}

// writableCheck: a default call's writable set must not contain a control
// path (the state dir, the config file, the executable): such a call is
// refused, whatever its command.
func writableCheck(f *hostFacts) check {
	c := check{name: "writable set", status: statusOK, required: f.writableErr != nil,
		detail: "/tmp and [sandbox] writable_roots hold no control path"}
	if f.writableErr != nil {
		msg := f.writableErr.Error()
		c.status, c.detail, c.fix = statusMissing, msg, ""
		if i := strings.LastIndex(msg, "; "); i > 0 {
			c.detail, c.fix = msg[:i], msg[i+2:]
		}
	}
	return c
}

// landlockChecks are the kernel's part of the sandbox: its ABI, and what
// a confined call gets for writes, reads, the network and scoping.
func landlockChecks(f *hostFacts, confined bool) []check {
	s := f.sup
	if s.ABIErr != nil || s.ABI < 1 {
		why := "unavailable"
		if s.ABIErr != nil {
			why = s.ABIErr.Error()
		}
		moot, fix := "no confined call runs without Landlock", "enable Landlock (the landlock line)"
		return []check{
			{name: "landlock", status: statusMissing, detail: why, required: confined,
				fix: "use a kernel with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y, landlock in lsm=), or make the default mode danger-full-access knowing commands then run unconfined"},
			{name: "writes", status: statusMissing, detail: moot, fix: fix},
			{name: "reads", status: statusMissing, detail: moot, fix: fix},
			{name: "network", status: statusMissing, detail: moot, fix: fix},
			{name: "scoping", status: statusMissing, detail: moot, fix: fix},
		}
	}
	lines := s.report()
	writes := check{name: "writes", status: statusOK, detail: "confined to the writable set; enforcement " + enforcement(s.ABI)}
	if enforcement(s.ABI) != "full" {
		writes.status, writes.fix = statusDegraded, "a kernel with Landlock ABI 5 or later governs truncation and device ioctls too"
	}
	scoping := check{name: "scoping", status: statusOK, detail: "signals and abstract unix sockets scoped"}
	if !scoped(s.ABI) {
		scoping = check{name: "scoping", status: statusDegraded, detail: "a confined command can signal processes and reach abstract unix sockets outside its sandbox",
			fix: "a kernel with Landlock ABI 6 or later (Linux 6.12)"}
	}
	landlock := check{name: "landlock", status: statusOK, detail: reportDetail(lines, "landlock"), required: confined}
	for _, e := range missingErrata(s.ABI, s.Errata) {
		landlock.detail += "; " + e.what + " (not fixed in this kernel)"
	}
	return []check{
		landlock,
		writes,
		readsCheck(f),
		networkCheck(f),
		scoping,
	}
}

// readsCheck: what a confined command cannot read.
func readsCheck(f *hostFacts) check {
	return check{name: "reads", status: statusOK,
		detail: fmt.Sprintf("confined: the state dirs, the spool dirs, the sessions' build caches and %d [sandbox] deny_read paths are withheld; spill files readable by exact path", f.denyRead)}
}

// networkCheck: whether network = "off" can be enforced, and the setting.
func networkCheck(f *hostFacts) check {
	if f.sup.ABI < 4 || !f.sup.NetFilter {
		c := check{name: "network", status: statusDegraded, required: f.network == "off",
			detail: `not governed: network = "off" needs Landlock ABI 4 and a seccomp filter for this architecture`,
			fix:    "a kernel with Landlock ABI 4 or later (Linux 6.7), or run bashcall in a network namespace without the access commands must not have"}
		if f.network == "off" {
			c.status, c.detail = statusMissing, `[sandbox] network = "off" cannot be enforced here: every confined call is refused`
		}
		return c
	}
	if f.network == "off" {
		return check{name: "network", status: statusOK, detail: "off: a confined command can neither connect nor listen over TCP nor open any socket but a unix one"}
	}
	return check{name: "network", status: statusOK, detail: `on (the default); [sandbox] network = "off" would be enforced here`}
}

// pid1Check: bashcall as PID 1 of its PID namespace cannot keep tasks: the
// kernel kills the whole namespace when PID 1 exits, so a background task
// dies with the call that started it.
func pid1Check(f *hostFacts) check {
	if f.pid1 {
		return check{name: "pid 1", status: statusDegraded,
			detail: "bashcall is PID 1 of its PID namespace: when it exits the kernel kills every process of the namespace, background tasks included",
			fix:    "run bashcall under a long-lived PID 1 (docker run --init, tini, or a container that stays up), every call of a session in that one namespace"}
	}
	return check{name: "pid 1", status: statusOK, detail: "bashcall is not PID 1 of its PID namespace"}
}

// privilegeChecks are what a confined command is left with.
func privilegeChecks(f *hostFacts) []check {
	s := f.sup
	if s.ABIErr != nil || s.ABI < 1 {
		moot, fix := "no confined call runs without Landlock", "enable Landlock (the landlock line)"
		return []check{
			{name: "capabilities", status: statusMissing, detail: moot, fix: fix},
			{name: "setuid/setgid bits", status: statusMissing, detail: moot, fix: fix},
			{name: "protection", status: statusMissing, detail: moot, fix: fix},
		}
	}
	lines := s.report()
	caps := check{name: "capabilities", status: statusOK, detail: reportDetail(lines, "capabilities")}
	if !s.Bounding {
		caps.status, caps.fix = statusDegraded, "run bashcall as root, or where unprivileged user namespaces are allowed"
	}
	setid := check{name: "setuid/setgid bits", status: statusOK, detail: reportDetail(lines, "setuid/setgid bits")}
	if !s.Seccomp {
		setid.status, setid.fix = statusDegraded, "run on amd64 or arm64"
	}
	protect := check{name: "protection", status: statusOK, detail: reportDetail(lines, "protection")}
	if s.NS == nsNone {
		protect.status = statusDegraded
		protect.fix = "run bashcall as root with / a mount (not a plain directory chrooted into), or allow unprivileged user namespaces (user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0); unset BASHCALL_PROTECT"
	}
	return []check{caps, setid, protect}
}

// reportDetail is what the support report says after "name: ".
func reportDetail(lines []string, name string) string {
	for _, l := range lines {
		if d, ok := strings.CutPrefix(l, name+": "); ok {
			return d
		}
	}
	return "unknown"
}
