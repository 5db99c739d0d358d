package main

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestDoctorChecks renders the checks of hosts bashcall meets: a healthy
// root host, a bare chroot without /proc where bashcall is PID 1, a kernel
// without Landlock, an old kernel as an unprivileged user, and a broken
// setup. The goldens hold the exact lines.
func TestDoctorChecks(t *testing.T) {
	healthy := func() *hostFacts {
		return &hostFacts{mode: modeWorkspaceWrite, shell: "/usr/bin/bash", stateDir: "/home/u/.local/state/bashcall",
			sup: support{ABI: 7, Errata: 0b111, NS: nsMount, Seccomp: true, Bounding: true}}
	}
	for _, tt := range []struct {
		name     string
		edit     func(f *hostFacts)
		canRun   bool
		required []string
	}{
		{"healthy", func(f *hostFacts) {}, true, nil},
		{"chroot_without_proc", func(f *hostFacts) {
			f.reexec = reexecError(syscall.ENOENT)
			f.proc = os.ErrNotExist
			f.pid1 = true
		}, false, []string{"/proc"}},
		{"full_access_without_proc", func(f *hostFacts) {
			f.mode = modeFullAccess
			f.config = "/etc/bashcall.toml"
			f.reexec = reexecError(syscall.ENOENT)
			f.proc = os.ErrNotExist
		}, true, nil},
		{"no_landlock", func(f *hostFacts) {
			f.sup = support{ABIErr: errNoLandlock, NS: nsUser, Seccomp: true, Bounding: true}
		}, false, []string{"landlock"}},
		{"errata_not_fixed", func(f *hostFacts) {
			f.sup.ABI, f.sup.Errata = 6, 0b100
		}, true, nil},
		{"old_kernel_unprivileged", func(f *hostFacts) {
			f.sup = support{ABI: 3, NS: nsNone}
		}, true, nil},
		{"broken", func(f *hostFacts) {
			f.config = "/etc/bashcall.toml"
			f.configErr = errors.New(`config "/etc/bashcall.toml": unknown key "shel"`)
			f.shellErr = toolErrorf("the configured shell %q is not on PATH", "bash")
			f.devNull = errors.New("not a character device")
			f.processes = errors.New("the limit on the user's processes (ulimit -u, RLIMIT_NPROC) is 8; bashcall needs at least 32 for its threads and the command's processes")
			f.stateErr = &hintError{errors.New(`state dir "/srv/s" is inside "/srv", which other users can write (mode 0777, no sticky bit), so they could replace it`), `use a state dir in a directory only you can write, or chmod go-w or +t "/srv"`}
			f.writableErr = toolErrorf(`refusing to run under workspace-write: the writable path "/tmp" overlaps "/tmp/bashcall", which a sandboxed command must not be able to change; move bashcall's state dir, spool dir, config file and executable outside the workspace, /tmp and [sandbox] writable_roots`)
		}, false, []string{"config", "shell", "/dev/null", "processes", "state dir", "writable set"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := healthy()
			tt.edit(f)
			checks := doctorChecks(f)
			got := renderDoctor(checks)
			golden(t, tt.name, got)
			var missing []string
			for _, c := range checks {
				if c.required && c.status == statusMissing {
					missing = append(missing, c.name)
				}
			}
			if (len(missing) == 0) != tt.canRun || strings.Join(missing, ",") != strings.Join(tt.required, ",") {
				t.Errorf("required and missing = %q, want %q", missing, tt.required)
			}
			if tt.canRun != strings.HasSuffix(got, "a call in the default mode can run here\n") {
				t.Errorf("verdict of %q, want canRun %v", got, tt.canRun)
			}
		})
	}
}

var doctorLine = regexp.MustCompile(`^(ok      |missing |degraded) (config|shell|/dev/null|processes|/proc|state dir|writable set|landlock|writes|reads|network|scoping|pid 1|capabilities|setuid/setgid bits|protection|default call): \S.*$`)

// TestDoctorHost runs doctor here: one line per check in the fixed
// format, the verdict a check line too, exit 0 with the "can run" verdict, and, on a root host with
// Landlock ABI 6 or later (this one), the exact output with the
// host-specific paths and ABI scrubbed.
func TestDoctorHost(t *testing.T) {
	e := newSandboxingEnv(t, "")
	r := e.run("", "doctor")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	for _, l := range lines {
		if !doctorLine.MatchString(l) {
			t.Errorf("doctor line %q is not in the format", l)
		}
	}
	sup := sandboxSupport(os.Getenv)
	if sup.ABI < 1 {
		// The default mode is confined: without Landlock it cannot run.
		if len(lines) != 17 || lines[len(lines)-1] != "missing  default call: a call in the default mode cannot run here; fix: see above: landlock" || r.code != 1 ||
			r.stderr != "bashcall: error: a call in the default mode cannot run here: missing landlock\n" {
			t.Errorf("doctor without Landlock: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		t.Skipf("no Landlock here (%v): the rest needs it", sup.ABIErr)
	}
	if len(lines) != 17 || lines[len(lines)-1] != "ok       default call: a call in the default mode can run here" || r.code != 0 || r.stderr != "" {
		t.Fatalf("doctor: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if os.Geteuid() != 0 || sup.ABI < 6 || sup.NS != nsMount || !sup.Seccomp {
		t.Skipf("the golden records a root host with Landlock ABI >= 6 and seccomp; here: uid %d, %+v", os.Geteuid(), sup)
	}
	shell, err := lookShell("bash", os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(e.scrub(r.stdout), e.config, "$CONFIG")
	got = strings.Replace(got, shell, "$BASH", 1)
	got = regexp.MustCompile(`ABI \d+`).ReplaceAllString(got, "ABI $$N")
	golden(t, "host", got)
}

// TestVersionNamesReexec: version says so when bashcall cannot
// re-execute itself; here it can, and says nothing of it.
func TestVersionNamesReexec(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		c := exec.Command(os.Args[0], arg)
		c.Env = append(os.Environ(), "BASHCALL_TEST_MAIN=1")
		out, err := c.Output()
		if err != nil || !strings.HasPrefix(string(out), "bashcall ") || strings.Contains(string(out), "re-execution") {
			t.Errorf("bashcall %s: %v, stdout %q", arg, err, out)
		}
	}
}
