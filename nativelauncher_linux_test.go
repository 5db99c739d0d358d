package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// launchers are the two ways a confined command is started: the native
// launcher and bashcall re-executed as its own launcher.
var launchers = []struct {
	name string
	goL  bool
}{{"native", false}, {"go", true}}

// launch runs argv (after the launcher's name) through the chosen
// launcher and returns what came of it.
func launch(t *testing.T, goLauncher bool, args ...string) (*runOutcome, string, error) {
	t.Helper()
	var out, errOut strings.Builder
	res, err := runCommand(&runSpec{
		Argv: append([]string{selfExe(), launcherArg}, args...), Dir: "/", Env: os.Environ(),
		Stdout: &out, Stderr: &errOut, Grace: time.Second, Launcher: true, GoLauncher: goLauncher,
	})
	return res, out.String() + errOut.String(), err
}

// TestNativeLauncherRuns: on amd64 and arm64 the native launcher is there
// and is what runs a confined command, sealed in its memfd; the command
// it starts holds no capability, has no_new_privs and the filter, and
// inherits none of the launcher's descriptors.
func TestNativeLauncherRuns(t *testing.T) {
	requireABI(t, 1)
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("the native launcher is built for amd64 and arm64")
	}
	f, err := nativeLauncher()
	if err != nil {
		t.Fatalf("no native launcher: %v", err)
	}
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	want := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if err != nil || seals&want != want {
		t.Errorf("seals %#x (%v), want %#x", seals, err, want)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Error("the sealed launcher could be written")
	}
	spec := &runSpec{Argv: []string{selfExe(), launcherArg, "-w", "/dev/null", "--", "/bin/true"}, Launcher: true}
	argv, _, ok := nativeLaunch(spec)
	if !ok || argv[0] != fmt.Sprintf("/proc/self/fd/%d", nativeSelfFD) {
		t.Fatalf("nativeLaunch = %q, %v: the native launcher would not run", argv, ok)
	}
	spec.GoLauncher = true
	if _, _, ok := nativeLaunch(spec); ok {
		t.Error("nativeLaunch ran with GoLauncher set")
	}
	res, out, err := launch(t, false, "-w", "/dev/null", "--", "/bin/sh", "-c",
		`grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; ls /proc/self/fd`)
	if err != nil || res.RunnerFailure != "" || res.ExitCode != 0 {
		t.Fatalf("launch: %+v, %v\n%s", res, err, out)
	}
	for _, line := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("the command's status lacks %q:\n%s", line, out)
		}
	}
	if os.Geteuid() == 0 && !strings.Contains(out, "CapBnd:\t0000000000000000\n") {
		t.Errorf("the bounding set was kept:\n%s", out)
	}
	// ls lists its own descriptor for the directory, 3, besides 0 1 2.
	if fds := strings.Fields(out[strings.LastIndex(out, "Seccomp:"):])[2:]; strings.Join(fds, " ") != "0 1 2 3" {
		t.Errorf("the command holds descriptors %v, want 0 1 2 (and ls's own 3)", fds)
	}
}

// TestLaunchersAgree: each way a launch can fail is reported in the same
// words by both launchers, and nothing runs.
func TestLaunchersAgree(t *testing.T) {
	requireABI(t, 1)
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.Mkdir(target, 0o700)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	ran := filepath.Join(dir, "ran")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"symlink", []string{"-w", link, "--", "/bin/touch", ran}, `opening rule path "` + link + `": too many levels of symbolic links`},
		{"own namespace", []string{"-ns", mountNSID(), "-w", "/dev/null", "--", "/bin/touch", ran}, "the launcher is not in a mount namespace of its own: it changes no mount"},
		{"usage", []string{"-w", "/dev/null", "-bogus", "--", "/bin/touch", ran}, `launcher usage: unexpected "-bogus"`},
		{"no command", []string{"-w", "/dev/null"}, "launcher usage: no command after --"},
		{"no shell", []string{"-w", "/dev/null", "--", "/nonexistent/sh", "-c", "true"}, `exec "/nonexistent/sh": no such file or directory`},
	} {
		for _, l := range launchers {
			t.Run(tt.name+"/"+l.name, func(t *testing.T) {
				res, out, err := launch(t, l.goL, tt.args...)
				got := fmt.Sprint(err)
				if res != nil {
					got = res.RunnerFailure
					if res.ExitCode != 125 {
						t.Errorf("exit code %d, want 125", res.ExitCode)
					}
				}
				if got != tt.want {
					t.Errorf("failure = %q, want %q (output %q)", got, tt.want, out)
				}
				if _, err := os.Stat(ran); err == nil {
					os.Remove(ran)
					t.Error("the command ran")
				}
			})
		}
	}
}

// TestNativeLauncherArm64 runs the embedded arm64 launcher under
// qemu-aarch64 (user mode), where there is one: its start, arguments,
// messages and privilege drop, up to the Landlock call, which qemu does
// not pass on. The amd64 one runs for real in every other test.
func TestNativeLauncherArm64(t *testing.T) {
	qemu, err := exec.LookPath("qemu-aarch64")
	if err != nil {
		t.Skip("needs qemu-aarch64 (Debian's qemu-user) to run the arm64 launcher")
	}
	for _, tt := range []struct {
		name, program string
		args          []string
		want          string
	}{
		{"usage", "P12345678", []string{"-bogus", "--", "/bin/true"}, `Slauncher usage: unexpected "-bogus"`},
		{"bashcall's failure", `Sopening rule path "/x": too many levels of symbolic links`, []string{"-w", "/x", "--", "/bin/true"},
			`Sopening rule path "/x": too many levels of symbolic links`},
		{"no program", "", []string{"--", "/bin/true"}, "Sno seccomp program on descriptor 5"},
		{"up to landlock", "P12345678", []string{"-w", "/tmp", "--", "/bin/true"}, "Slandlock_restrict_self: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, statusW, _ := os.Pipe()
			prog, progW, _ := os.Pipe()
			devnull, _ := os.Open(os.DevNull)
			defer status.Close()
			defer prog.Close()
			defer devnull.Close()
			progW.WriteString(tt.program)
			progW.Close()
			c := exec.Command(qemu, append([]string{"launcher/launcher_arm64.bin", launcherArg}, tt.args...)...)
			c.ExtraFiles = []*os.File{statusW, devnull, prog}
			err := c.Start()
			statusW.Close()
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(status)
			c.Wait()
			if !strings.HasPrefix(string(got), tt.want) || c.ProcessState.ExitCode() != 125 {
				t.Errorf("status %q, exit %d; want %q..., 125", got, c.ProcessState.ExitCode(), tt.want)
			}
		})
	}
}

// TestNativeLauncherRefused: where the memfd cannot be executed (a
// security module, a noexec policy: here a memfd sealed against exec), a
// confined command still runs, launched by bashcall itself, and later
// launches of the process do not try the memfd again.
func TestNativeLauncherRefused(t *testing.T) {
	requireABI(t, 1)
	if _, err := nativeLauncher(); err != nil {
		t.Skipf("no native launcher: %v", err)
	}
	fd, err := unix.MemfdCreate("bashcall-launcher", unix.MFD_CLOEXEC|unix.MFD_NOEXEC_SEAL)
	if err != nil {
		t.Skipf("memfd_create(MFD_NOEXEC_SEAL): %v (a kernel before 6.3)", err)
	}
	noexec := os.NewFile(uintptr(fd), "noexec")
	noexec.Write(nativeLauncherBytes)
	saved := native.file
	native.file = noexec
	t.Cleanup(func() {
		native.file = saved
		native.refused.Store(false)
		noexec.Close()
	})
	for i := 0; i < 2; i++ {
		res, out, err := launch(t, false, "-w", "/dev/null", "--", "/bin/sh", "-c", "grep ^NoNewPrivs: /proc/self/status")
		if err != nil || res.RunnerFailure != "" || res.ExitCode != 0 || out != "NoNewPrivs:\t1\n" {
			t.Fatalf("launch %d: %+v, %v, %q", i, res, err, out)
		}
		if !native.refused.Load() {
			t.Fatalf("launch %d: the refused memfd is not remembered", i)
		}
	}
}
