package main

// Attacks on the launchers' mount namespace and on the servers' warm
// children (PROTOCOL.md sections 5 and 7), run against both launchers.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// launcherEnvs select each launcher for an end-to-end call.
var launcherEnvs = []struct {
	name string
	env  []string
}{
	{"native", nil},
	{"go", []string{"BASHCALL_LAUNCHER=go"}},
}

// TestMountBehindUnsearchableDir: a mount point below a directory the
// user bashcall runs as cannot search (another user's home holding a FUSE
// mount, /var/lib/docker's overlays) is out of the command's reach; it
// must not keep every confined call of that user from running.
func TestMountBehindUnsearchableDir(t *testing.T) {
	requireABI(t, 1)
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	for _, l := range launcherEnvs {
		t.Run(l.name, func(t *testing.T) {
			e := newConfinedEnv(t, "").asNobody()
			e.extraEnv = l.env
			private := filepath.Join(e.dir, "private")
			mountTmpfs(t, filepath.Join(private, "mnt"), 1<<20)
			os.Chown(private, 0, 0)
			os.Chmod(private, 0o700)
			r := e.call(bashReq("echo ran > here && cat here", ""))
			if r.text() != "ran\n" {
				t.Errorf("a mount behind an unsearchable directory broke the call: %q", r.text())
			}
		})
	}
}

// mountNames are mount point names that mountinfo escapes (space, tab,
// newline, backslash) and whitespace it does not (carriage return,
// vertical tab, form feed, and the Unicode spaces U+0085 and U+00A0).
var mountNames = []string{"sp ace", "ta\tb", "new\nline", `back\slash`, "c\rr", "v\vt", "f\ff", "nel\u0085", "nb\u00a0sp"}

// TestMountPointNames: every mount outside the writable set is read-only
// for a confined command whatever its mount point's name, so that the
// command cannot change the mode of a file it owns there; a workspace so
// named stays writable. As root and as an unprivileged user.
func TestMountPointNames(t *testing.T) {
	requireABI(t, 1)
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	for _, user := range []string{"root", "nobody"} {
		for _, l := range launcherEnvs {
			t.Run(user+"/"+l.name, func(t *testing.T) {
				e := newConfinedEnv(t, "")
				if user == "nobody" {
					e.asNobody()
				}
				e.extraEnv = l.env
				owner := 0
				if user == "nobody" {
					owner = nobodyID
				}
				var files []string
				for i, name := range mountNames {
					mnt := filepath.Join(e.dir, fmt.Sprintf("m%d-%s", i, name))
					mountTmpfs(t, mnt, 1<<20)
					f := filepath.Join(mnt, "file")
					if err := os.WriteFile(f, nil, 0o644); err != nil {
						t.Fatal(err)
					}
					os.Chown(mnt, owner, owner)
					os.Chown(f, owner, owner)
					files = append(files, f)
				}
				script := ""
				for _, f := range files {
					script += fmt.Sprintf("chmod 600 %s; ", shellQuote(f))
				}
				r := e.call(bashReq(script+"true", ""))
				for i, f := range files {
					if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o644 {
						t.Errorf("mount %q: the command changed %q's mode (%v, %v):\n%s", mountNames[i], f, fi.Mode(), err, r.text())
					}
				}
				for i, name := range mountNames {
					ws := filepath.Join(e.dir, fmt.Sprintf("w%d-%s", i, name))
					os.Mkdir(ws, 0o755)
					os.Chown(ws, owner, owner)
					r := e.call(sessionCall("echo written > f && cat f", "S"+fmt.Sprint(i), ws, ""))
					if r.text() != "written\n" {
						t.Errorf("workspace %q: %q", ws, r.text())
					}
				}
			})
		}
	}
}

// shellQuote quotes s for bash, whatever bytes it holds.
func shellQuote(s string) string {
	return "$'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\t", `\t`, "\r", `\r`, "\v", `\v`, "\f", `\f`).Replace(s) + "'"
}

// TestManyMounts: a host whose mount table lists over a mebibyte (a few
// thousand mounts) still runs confined calls, with every mount outside
// the writable set read-only. The mounts live in a namespace of the
// test's own, made for this bashcall alone.
func TestManyMounts(t *testing.T) {
	requireABI(t, 1)
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	for _, l := range launcherEnvs {
		t.Run(l.name, func(t *testing.T) {
			e := newConfinedEnv(t, "")
			e.extraEnv = l.env
			// Long paths make long mountinfo lines: 160 binds of a
			// directory of a 3.5 KB path onto others list about 1.1 MiB.
			base := filepath.Join(e.dir, "many")
			if err := os.Mkdir(base, 0o755); err != nil {
				t.Fatal(err)
			}
			deep := func(c string) string { return strings.TrimSuffix(strings.Repeat(strings.Repeat(c, 250)+"/", 14), "/") }
			from, onto := filepath.Join(base, deep("a")), filepath.Join(base, deep("b"))
			script := `set -e
mount -t tmpfs tmpfs "$BASE"
mkdir -p "$FROM" "$ONTO"
: > "$FROM/file"
for i in $(seq 160); do mkdir "$ONTO/$i"; mount --bind "$FROM" "$ONTO/$i"; done
test "$(wc -c < /proc/self/mountinfo)" -gt 1048576
exec "$@"`
			c := e.cmd()
			c.Args = append([]string{"unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"}, c.Args...)
			c.Path, _ = exec.LookPath("unshare")
			c.Env = append(c.Env, "BASE="+base, "FROM="+from, "ONTO="+onto)
			c.Stdin = strings.NewReader(bashReq(fmt.Sprintf("chmod 600 %s; echo ran", shellQuote(onto+"/7/file")), ""))
			out, err := c.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			text := decodeResponse(t, string(out)).text()
			if !strings.Contains(text, "ran") || !strings.Contains(text, "Read-only file system") {
				t.Errorf("a call on a host with a large mount table = %q", text)
			}
		})
	}
}

// TestServerChildrenOutOfReach: a confined command looks for the other
// bashcall processes of its server (the idle children waiting for the
// next calls, its own call's process, the server) and tries to stop them,
// to hand them a call of its own through their stdin, to read their
// environment and descriptors (the native launcher's memfd among them).
// All fails, and the server answers the next call.
func TestServerChildrenOutOfReach(t *testing.T) {
	requireABI(t, 6) // signal scoping
	for _, l := range launcherEnvs {
		t.Run(l.name, func(t *testing.T) {
			e := newConfinedEnv(t, "")
			e.extraEnv = append(l.env, "MY_SECRET=hunter2")
			dir := filepath.Join(e.dir, "spool")
			s := e.serve(dir, "-workers", "2")
			defer s.stop(t, syscall.SIGTERM)
			waitFor(t, 10*time.Second, "a warm child", func() bool { return len(callProcesses(e.stateDir)) == 1 })
			marker := filepath.Join(e.workspace, "planted")
			planted := bashReq("touch "+marker, "")
			// The attack takes the warm child; the quick call that comes
			// next is answered meanwhile (the test then makes quick-done),
			// and the child started after it waits for the next call while
			// the attack looks for it.
			quickDone := filepath.Join(e.workspace, "quick-done")
			attack := fmt.Sprintf(`while [ ! -e %[4]s ]; do sleep 0.05; done
for i in $(seq 200); do [ $(pgrep -fc '^bashcall -state-dir %[1]s') -ge 2 ] && break; sleep 0.05; done
n=0
for p in $(pgrep -f '^bashcall -state-dir %[1]s') %[2]d; do
	n=$((n+1))
	kill -STOP $p && echo "REACHED: stopped $p"
	printf '%%s' %[3]s > /proc/$p/fd/0 && echo "REACHED: wrote to $p"
	cat /proc/$p/environ && echo "REACHED: environ of $p"
	for f in /proc/$p/fd/*; do readlink $f && echo "REACHED: $f"; : >> $f && echo "REACHED: opened $f"; done
done
echo "tried $n"`, e.stateDir, s.cmd.Process.Pid, shellQuote(planted), shellQuote(quickDone))
			drop(t, dir, "a.json", bashReq(attack, ""))
			drop(t, dir, "quick.json", bashReq("true", ""))
			awaitResponse(t, dir, "quick.json")
			// The quick call's process has answered; it may take a moment
			// to exit (a second under the race detector). Then only the
			// attack's process and the next warm child are left.
			waitFor(t, 10*time.Second, "the quick call's process to exit and the next child to wait", func() bool {
				return len(callProcesses(e.stateDir)) == 2
			})
			os.WriteFile(quickDone, nil, 0o644)
			text := awaitResponse(t, dir, "a.json").text()
			if !strings.Contains(text, "tried 3") {
				t.Errorf("the attack did not find the server's processes: %q", text)
			}
			if strings.Contains(text, "REACHED") || strings.Contains(text, "hunter2") {
				t.Errorf("the command reached a bashcall process:\n%s", text)
			}
			drop(t, dir, "b.json", bashReq("echo answered", ""))
			if got := awaitResponse(t, dir, "b.json").text(); got != "answered\n" {
				t.Errorf("the next call = %q", got)
			}
			time.Sleep(200 * time.Millisecond)
			if _, err := os.Stat(marker); err == nil {
				t.Error("a call written to a waiting child's stdin ran")
			}
		})
	}
}

// TestNestedWritableDirs: a workspace inside a writable root (listed
// after it) and a writable root inside the workspace stay writable, cannot
// be renamed away, and keep their git hooks read-only, whichever of the
// two is bound first. As root and as an unprivileged user.
func TestNestedWritableDirs(t *testing.T) {
	requireABI(t, 1)
	for _, user := range []string{"root", "nobody"} {
		for _, l := range launcherEnvs {
			t.Run(user+"/"+l.name, func(t *testing.T) {
				if user == "root" && os.Geteuid() != 0 {
					t.Skip("needs root")
				}
				e := newConfinedEnv(t, "")
				outer := filepath.Join(e.dir, "outer")
				ws := filepath.Join(outer, "proj")
				inner := filepath.Join(ws, "sub")
				for _, d := range []string{inner, filepath.Join(ws, ".git", "hooks")} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				gitRun(t, ws, "init", "-q")
				os.WriteFile(e.config, []byte(fmt.Sprintf("[sandbox]\nwritable_roots = [%s, %s]\n", jsonString(inner), jsonString(outer))), 0o600)
				if user == "nobody" {
					e.asNobody()
				}
				e.extraEnv = l.env
				script := fmt.Sprintf(`echo a > %[1]s/a && echo b > %[2]s/b && echo c > %[3]s/c && cat %[1]s/a %[2]s/b %[3]s/c
mv %[2]s %[2]s.moved && echo "REACHED: moved the workspace"
mv %[3]s %[3]s.moved && echo "REACHED: moved the inner root"
echo evil > %[2]s/.git/hooks/pre-commit && echo "REACHED: planted a hook"
true`, shellQuote(outer), shellQuote(ws), shellQuote(inner))
				r := e.call(sessionCall(script, "S", ws, ""))
				text := r.text()
				if !strings.HasPrefix(text, "a\nb\nc\n") || strings.Contains(text, "REACHED") {
					t.Errorf("nested writable directories:\n%s", text)
				}
				if _, err := os.Stat(filepath.Join(ws, ".git", "hooks", "pre-commit")); err == nil {
					t.Error("a hook was planted")
				}
			})
		}
	}
}
