package main

// Attacks on confinement, each performed for real (PROTOCOL.md sections 5
// and 7): a hostile command tries to widen its sandbox, keep privileges,
// plant control files or deny service to another session, and fails.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mechanisms are the two ways planted-code paths and control files are
// protected: a private mount namespace, and (forced) snapshots.
var mechanisms = []struct {
	name string
	env  []string
}{
	{"namespace", nil},
	{"snapshot", []string{"BASHCALL_PROTECT=snapshot"}},
}

// sessionCall is a bash request of session id in workspace cwd.
func sessionCall(command, id, cwd, extra string) string {
	args := `{"command":` + jsonString(command) + `,"description":"d"`
	if extra != "" {
		args += "," + extra
	}
	return `{"name":"bash","arguments":` + args + `},"session":{"id":` + jsonString(id) + `,"cwd":` + jsonString(cwd) + `}}`
}

// TestWorkspaceSwap: a command replaces its workspace with a symlink to a
// directory outside every writable one (or with another directory); the
// session's next call must not write there.
func TestWorkspaceSwap(t *testing.T) {
	requireABI(t, 1)
	for _, m := range mechanisms {
		for _, swap := range []string{"symlink", "directory"} {
			t.Run(m.name+"/"+swap, func(t *testing.T) {
				e := newConfinedEnv(t, "")
				e.extraEnv = m.env
				parent, err := os.MkdirTemp("/tmp", "bashcall-swap-") // writable by the command
				if err != nil {
					t.Fatal(err)
				}
				defer os.RemoveAll(parent)
				ws := filepath.Join(parent, "x")
				os.Mkdir(ws, 0o755)
				target := filepath.Join(e.dir, "precious")
				os.Mkdir(target, 0o755)
				attack := fmt.Sprintf("cd / && mv %q %q.old && ln -s %q %q && echo swapped", ws, ws, target, ws)
				if swap == "directory" {
					attack = fmt.Sprintf("cd / && mv %q %q.old && mkdir %q && echo swapped", ws, ws, ws)
				}
				first := e.call(sessionCall(attack, "S", ws, ""))
				second := e.call(sessionCall("touch planted && echo planted", "S", ws, ""))
				if _, err := os.Lstat(filepath.Join(target, "planted")); err == nil {
					t.Fatalf("the second call wrote into the swapped-in directory: %q", second.text())
				}
				if strings.Contains(first.text(), "swapped") {
					if !second.IsError || !strings.Contains(second.text(), "refusing the session cwd "+jsonString(ws)) {
						t.Errorf("after a swap, the next call = %q", second.text())
					}
				} else if m.name == "snapshot" {
					t.Errorf("the swap failed where nothing prevents it: %q", first.text())
				}
				t.Logf("swap: %q; next call: %q", first.text(), second.text())
			})
		}
	}
}

// TestWritableRootSymlink: a writable_roots entry reached through a
// symlink is refused, never granted at its target.
func TestWritableRootSymlink(t *testing.T) {
	dir := newTestEnv(t, "").dir
	target := filepath.Join(dir, "target")
	os.Mkdir(target, 0o755)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	e := newConfinedEnv(t, "[sandbox]\nwritable_roots = ["+jsonString(link)+"]\n")
	r := e.call(bashReq("touch "+filepath.Join(link, "x"), ""))
	want := fmt.Sprintf("Error: refusing to run under workspace-write: the writable root %q is reached through a symlink (it resolves to %q)", link, target)
	if !r.IsError || !strings.HasPrefix(r.text(), want) {
		t.Errorf("text = %q, want prefix %q", r.text(), want)
	}
	if _, err := os.Stat(filepath.Join(target, "x")); err == nil {
		t.Error("the command wrote through the symlinked root")
	}
}

// TestControlPathsRefused: a writable set that would hold the default
// config path (even before it exists), the bashcall executable or the
// approval command is refused with both paths named; a relative approval
// command is a configuration error.
func TestControlPathsRefused(t *testing.T) {
	e := newConfinedEnv(t, "")
	conf := filepath.Join(e.workspace, "conf")
	e.extraEnv = []string{"XDG_CONFIG_HOME=" + conf}
	r := e.call(bashReq(`mkdir -p "$XDG_CONFIG_HOME/bashcall" && echo '[sandbox]' > "$XDG_CONFIG_HOME/bashcall/config.toml"`, ""))
	want := fmt.Sprintf("overlaps %q", filepath.Join(conf, "bashcall", "config.toml"))
	if !r.IsError || !strings.Contains(r.text(), want) || !strings.Contains(r.text(), jsonString(e.workspace)) {
		t.Errorf("default config path in the workspace: %q, want it refused naming both paths", r.text())
	}
	if _, err := os.Stat(conf); err == nil {
		t.Error("the command created the config directory")
	}

	// The executable, copied into the workspace and run from there.
	e = newConfinedEnv(t, "")
	exe, _ := os.Executable()
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(e.workspace, "bashcall")
	if err := os.WriteFile(inside, b, 0o755); err != nil {
		t.Fatal(err)
	}
	c := e.cmd()
	c.Path, c.Args[0] = inside, inside
	c.Stdin = strings.NewReader(bashReq("echo trojan > bashcall", ""))
	out, _ := c.Output()
	w := decodeResponse(t, string(out))
	if !w.IsError || !strings.Contains(w.text(), fmt.Sprintf("overlaps %q", inside)) {
		t.Errorf("executable in the workspace: %q", w.text())
	}

	// The approval command: relative is refused outright, inside the
	// workspace the call is.
	e = newConfinedEnv(t, "[approval]\ncommand = [\"approve.sh\"]\n")
	res := e.run(bashReq("true", ""))
	if res.code != 2 || !strings.Contains(res.stdout, `Error: invalid configuration: config `) || !strings.Contains(res.stdout, `approval.command: the program must be an absolute path, got \"approve.sh\"`) {
		t.Errorf("relative approval command: exit %d, %q", res.code, res.stdout)
	}
	e = newConfinedEnv(t, "")
	approver := filepath.Join(e.workspace, "approve.sh")
	os.WriteFile(e.config, []byte("[approval]\ncommand = ["+jsonString(approver)+"]\n"), 0o600)
	r = e.call(bashReq("echo 'echo allowed-once' > approve.sh", ""))
	if !r.IsError || !strings.Contains(r.text(), fmt.Sprintf("overlaps %q", approver)) {
		t.Errorf("approval command in the workspace: %q", r.text())
	}
}

// TestNoPrivileges: a confined command has no capabilities and
// no_new_privs, cannot make a setuid file or a device node, cannot change
// the mode or owner of files outside its writable set, and cannot read
// bashcall's own environment through /proc. As root and as an
// unprivileged user.
func TestNoPrivileges(t *testing.T) {
	requireABI(t, 1)
	for _, user := range []string{"root", "nobody"} {
		for _, m := range mechanisms {
			t.Run(user+"/"+m.name, func(t *testing.T) {
				if user == "root" && os.Geteuid() != 0 {
					t.Skip("needs root")
				}
				e := newConfinedEnv(t, "")
				outside := filepath.Join(e.dir, "outside")
				os.Mkdir(outside, 0o755)
				shell := filepath.Join(outside, "sh")
				b, _ := os.ReadFile("/bin/true")
				os.WriteFile(shell, b, 0o755)
				if user == "nobody" {
					e.asNobody()
				}
				e.extraEnv = append(m.env, "MY_SECRET=hunter2")
				script := fmt.Sprintf(`grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status
chmod 4755 %[1]q; chown 0:0 %[1]q; touch -d 2001-01-01 %[1]q
cp /bin/true "$PWD/suid" && chmod 4755 "$PWD/suid"; stat -c 'suid-mode %%a' "$PWD/suid"
mknod "$PWD/blk" b 8 0; mknod "$PWD/chr" c 1 3
cat /proc/$PPID/environ /proc/$PPID/cmdline; tr '\0' '\n' < /proc/$PPID/environ | grep -c MY_SECRET
true`, shell)
				r := e.call(bashReq(script, ""))
				text := r.text()
				for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
					if !strings.Contains(text, set+":\t0000000000000000") {
						t.Errorf("%s is not empty:\n%s", set, text)
					}
				}
				if !strings.Contains(text, "NoNewPrivs:\t1") {
					t.Errorf("no_new_privs is not set:\n%s", text)
				}
				if m.name == "namespace" && !strings.Contains(text, "CapBnd:\t0000000000000000") {
					t.Errorf("the bounding set is not empty:\n%s", text)
				}
				if strings.Contains(text, "hunter2") {
					t.Errorf("bashcall's environment leaked:\n%s", text)
				}
				if strings.Contains(text, "suid-mode 4755") {
					t.Errorf("a setuid file was made:\n%s", text)
				}
				// Without a namespace, Landlock does not govern the metadata
				// of a file the user owns; the setuid bit is refused anyway.
				fi, err := os.Stat(shell)
				if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("the outside file became setuid: %v %v\n%s", fi.Mode(), err, text)
				}
				if m.name == "namespace" && (fi.Mode().Perm() != 0o755 || fi.ModTime().Year() == 2001) {
					t.Errorf("the outside file changed: %v %v\n%s", fi.Mode(), fi.ModTime(), text)
				}
				if st := fi.Sys().(*syscall.Stat_t); user == "nobody" && st.Uid != nobodyID {
					t.Errorf("the outside file changed owner to %d", st.Uid)
				}
				for _, dev := range []string{"blk", "chr"} {
					if _, err := os.Lstat(filepath.Join(e.workspace, dev)); err == nil {
						t.Errorf("a device node %s was made:\n%s", dev, text)
					}
				}
			})
		}
	}
}

// TestInheritedDescriptors: a descriptor the host left open reaches no
// command, in the foreground or in a background task, in any mode.
func TestInheritedDescriptors(t *testing.T) {
	for _, mode := range []string{modeReadOnly, modeFullAccess} {
		for _, bg := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/background=%v", mode, bg), func(t *testing.T) {
				newEnv := newTestEnv
				if mode != modeFullAccess {
					newEnv = newConfinedEnv
				}
				e := newEnv(t, "[sandbox]\nmode = "+jsonString(mode)+"\n")
				logPath := filepath.Join(e.dir, "host.log")
				logFile, err := os.OpenFile(logPath, os.O_RDWR|os.O_CREATE, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				defer logFile.Close()
				script := `ls -l /proc/$$/fd/; echo pwned >&3; echo pwned >&4; true`
				extra := ""
				if bg {
					extra = `"run_in_background":true`
				}
				c := e.cmd()
				c.ExtraFiles = []*os.File{logFile, logFile} // descriptors 3 and 4
				c.Stdin = strings.NewReader(sessionReq("bash", `{"command":`+jsonString(script)+`,"description":"d"`+prefixComma(extra)+`}`, "S"))
				out, err := c.Output()
				if err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				text := decodeResponse(t, string(out)).text()
				if bg {
					text = e.call(sessionReq("bash_output", `{"task_id":"bash-1","wait":true}`, "S")).text()
				}
				if strings.Contains(text, "host.log") {
					t.Errorf("an inherited descriptor reached the command:\n%s", text)
				}
				if b, _ := os.ReadFile(logPath); len(b) != 0 {
					t.Errorf("the command wrote through an inherited descriptor: %q", b)
				}
			})
		}
	}
}

func prefixComma(s string) string {
	if s == "" {
		return ""
	}
	return "," + s
}

// TestTamperingRepaired: a confined command of session A changes the
// modes of the state dir and of session B's task. Where a mount namespace
// is had the changes fail; elsewhere bashcall repairs them and says so.
// Either way B still reads its task and every later invocation works.
func TestTamperingRepaired(t *testing.T) {
	requireABI(t, 1)
	for _, user := range []string{"root", "nobody"} {
		for _, m := range mechanisms {
			t.Run(user+"/"+m.name, func(t *testing.T) {
				if user == "root" && os.Geteuid() != 0 {
					t.Skip("needs root")
				}
				e := newConfinedEnv(t, "")
				def := filepath.Join(e.dir, "xdg-state", "bashcall")
				if err := os.MkdirAll(def, 0o700); err != nil {
					t.Fatal(err)
				}
				if user == "nobody" {
					e.asNobody()
				}
				e.extraEnv = append(m.env, "XDG_STATE_HOME="+filepath.Dir(def))
				start := e.call(sessionReq("bash", `{"command":"echo hello-from-b; sleep 30","description":"d","run_in_background":true}`, "B"))
				if start.text() != textStarted("bash-1") {
					t.Fatalf("start: %q", start.text())
				}
				attack := `chmod -R 000 "$BASHCALL_HOME/tasks" "$BASHCALL_HOME/sessions"; chmod 000 "$BASHCALL_HOME"/tasks/*; chmod 755 "$BASHCALL_HOME"; stat -c '%a' "$BASHCALL_HOME"; true`
				a := e.call(sessionReq("bash", `{"command":`+jsonString(attack)+`,"description":"d"}`, "A"))
				t.Logf("attack: %q", a.text())
				res := e.run(sessionReq("bash_output", `{"task_id":"bash-1"}`, "B"))
				if res.code != 0 {
					t.Fatalf("B's read: exit %d, stderr %q", res.code, res.stderr)
				}
				if text := decodeResponse(t, res.stdout).text(); !strings.Contains(text, "hello-from-b") {
					t.Errorf("B's read after the attack = %q (stderr %q)", text, res.stderr)
				}
				if fi, err := os.Stat(e.stateDir); err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("state dir mode = %v, %v", fi.Mode(), err)
				}
				if r := e.call(sessionReq("bash_list", `{}`, "B")); !strings.Contains(r.text(), "bash-1 running") {
					t.Errorf("B's list = %q", r.text())
				}
				// Closing the state dirs (chmod 000: no other user gains,
				// so nothing refuses them) must not lock bashcall out
				// either: the call's own and the default one, whose list
				// of spool dirs every confined call reads. A task does it,
				// so that no revert after a foreground call undoes it.
				attack = `chmod 000 "$BASHCALL_HOME" "$XDG_STATE_HOME/bashcall"; sleep 30`
				e.call(sessionReq("bash", `{"command":`+jsonString(attack)+`,"description":"d","run_in_background":true}`, "A"))
				time.Sleep(300 * time.Millisecond)
				if r := e.run(sessionReq("bash", `{"command":"echo after","description":"d"}`, "A")); decodeResponse(t, r.stdout).text() != "after\n" {
					t.Logf("stderr: %s", r.stderr)
					t.Errorf("a call after the state dirs were closed: %q", decodeResponse(t, r.stdout).text())
				}
				if r := e.call(sessionReq("bash_list", `{}`, "B")); !strings.Contains(r.text(), "bash-1 running") {
					t.Errorf("B's list after the state dirs were closed = %q", r.text())
				}
				e.call(sessionReq("bash_kill", `{"task_id":"bash-2"}`, "A"))
				e.call(sessionReq("bash_kill", `{"task_id":"bash-1"}`, "B"))
			})
		}
	}
}

// decodeStructured decodes a response's structuredContent into v.
func decodeStructured(t *testing.T, r wireResponse, v any) {
	t.Helper()
	if err := json.Unmarshal(r.StructuredContent, v); err != nil {
		t.Fatalf("structuredContent %s: %v", r.StructuredContent, err)
	}
}

var _ = exec.Command

// TestVersionReport: version says whether capabilities are dropped, which
// protection mechanism is in force and which control paths it protects.
func TestVersionReport(t *testing.T) {
	e := newConfinedEnv(t, "")
	v := e.run("", "version").stdout
	for _, want := range []string{
		"\nsetuid/setgid bits: refused (seccomp)\n",
		"\nreads: confined; the state dir and [sandbox] deny_read withheld, spill files readable by exact path\n",
		"\nprotection: private mount namespace;",
		"\ncontrol paths (never writable, replaceable or inside a writable path of a confined call): " + e.stateDir + ", " + e.config + ", ",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("version lacks %q:\n%s", want, v)
		}
	}
	if os.Geteuid() == 0 && !strings.Contains(v, "\ncapabilities: all dropped (effective, permitted, inheritable, ambient, bounding); no_new_privs\n") {
		t.Errorf("version as root:\n%s", v)
	}
	native := fmt.Sprintf("\nlauncher: native (%d bytes, static, run from a sealed memfd)\n", len(nativeLauncherBytes))
	if os.Getenv("BASHCALL_LAUNCHER") == "go" {
		native = "\nlauncher: bashcall itself (BASHCALL_LAUNCHER=go)\n"
	}
	if (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") && !strings.Contains(v, native) {
		t.Errorf("version lacks %q:\n%s", native, v)
	}
	e.extraEnv = []string{"BASHCALL_PROTECT=snapshot", "BASHCALL_LAUNCHER=go"}
	v = e.run("", "version").stdout
	if !strings.Contains(v, "\nprotection: snapshot;") || !strings.Contains(v, "\nlauncher: bashcall itself (BASHCALL_LAUNCHER=go)\n") {
		t.Errorf("version with the snapshot mechanism and the Go launcher:\n%s", v)
	}
}

// TestPlantedShell: a confined call plants a bash in a directory that is
// on PATH before the real one; no later call, confined or approved
// unconfined, of its session, another or none, runs it.
func TestPlantedShell(t *testing.T) {
	e := newConfinedEnv(t, "")
	bin := filepath.Join(e.workspace, "bin")
	os.Mkdir(bin, 0o755)
	marker := filepath.Join(e.dir, "planted-shell-ran")
	e.extraEnv = []string{"PATH=" + bin + ":" + os.Getenv("PATH")}
	plant := fmt.Sprintf("printf '#!/usr/bin/bash\\ntouch %s\\nexec /usr/bin/bash \"$@\"\\n' > bin/bash && chmod +x bin/bash", marker)
	e.call(sessionCall(plant, "S", e.workspace, ""))
	// Nor does another session's call, in a workspace of its own, nor a
	// call without a session: the shell lies where a confined call wrote.
	other := filepath.Join(e.dir, "other")
	os.Mkdir(other, 0o755)
	for _, extra := range []string{"", `"sandbox_permissions":"danger-full-access","justification":"The test needs it."`} {
		for _, req := range []string{sessionCall("echo approved", "S", e.workspace, extra),
			sessionCall("echo approved", "T", other, extra), bashReq("echo approved", extra)} {
			if extra != "" {
				req = strings.TrimSuffix(req, "}") + `,"approval":"allowed-once"}`
			}
			r := e.call(req)
			if !r.IsError || !strings.Contains(r.text(), "refusing to run: the shell "+jsonString(filepath.Join(bin, "bash"))) {
				t.Errorf("with a planted shell first on PATH: %s\n%q", req, r.text())
			}
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the planted shell ran")
	}
}

// TestReadOnlyMountStays: a workspace the administrator bound read-only
// stays read-only for a confined command.
func TestReadOnlyMountStays(t *testing.T) {
	e := newConfinedEnv(t, "")
	if os.Geteuid() != 0 {
		t.Skip("binding a directory read-only needs root")
	}
	if err := unix.Mount(e.workspace, e.workspace, "", unix.MS_BIND, ""); err != nil {
		t.Skip(err)
	}
	defer unix.Unmount(e.workspace, unix.MNT_DETACH)
	if err := unix.Mount("", e.workspace, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	r := e.call(bashReq("echo written > file", ""))
	if _, err := os.Stat(filepath.Join(e.workspace, "file")); err == nil {
		t.Errorf("a read-only mount became writable: %q", r.text())
	}
}

// TestWorkspaceListTampering: a confined command that chmods the state
// dir's list of pinned workspaces, its lock and the task lock (Landlock
// does not govern chmod; the snapshot mechanism does not bind the state
// dir read-only) neither lifts the protection of another session's
// workspace nor makes a new session's first call or a background start
// fail: the modes are put back.
func TestWorkspaceListTampering(t *testing.T) {
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			e := newConfinedEnv(t, "")
			e.extraEnv = m.env
			wsA, err := os.MkdirTemp("/tmp", "bashcall-ws-a-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(wsA)
			newRepo(t, wsA)
			if os.Geteuid() == 0 {
				exec.Command("chown", "-R", fmt.Sprint(nobodyID), wsA).Run()
				e.asNobody()
			}
			e.call(sessionCall("true", "A", wsA, ""))
			printBig := sessionCall("head -c 100000 /dev/zero | tr '\\0' x", "B", e.workspace, "")
			e.call(printBig) // makes spill.lock
			bg := `{"command":"true","description":"d","run_in_background":true}`
			if r := e.call(sessionReq("bash", bg, "B")); r.text() != textStarted("bash-1") {
				t.Fatalf("start: %q", r.text())
			}
			e.call(sessionCall(`chmod 000 "$BASHCALL_HOME/workspaces" "$BASHCALL_HOME/workspaces.lock" "$BASHCALL_HOME/lock" "$BASHCALL_HOME/spill.lock"; true`, "B", e.workspace, ""))
			plant := fmt.Sprintf(`printf '#!/bin/sh\necho planted\n' > %q/.git/hooks/pre-commit; true`, wsA)
			e.call(sessionCall(plant, "B", e.workspace, ""))
			if _, err := os.Stat(filepath.Join(wsA, ".git/hooks/pre-commit")); err == nil {
				t.Error("session B planted a hook in session A's workspace after chmodding the list")
			}
			wsC := filepath.Join(e.dir, "wsC")
			os.Mkdir(wsC, 0o777)
			if r := e.call(sessionCall("echo C-ran", "C", wsC, "")); r.text() != "C-ran\n" {
				t.Errorf("a new session's first call after the chmod: %q", r.text())
			}
			if r := e.call(sessionReq("bash", bg, "B")); r.text() != textStarted("bash-2") {
				t.Errorf("a background start after the chmod: %q", r.text())
			}
			big := e.call(printBig)
			if s := stdoutResult(t, big); s.SpillPath == "" {
				text := big.text()
				t.Errorf("no complete copy after the chmod: %q", text[max(0, len(text)-120):])
			}
			for _, n := range []string{"workspaces", "workspaces.lock", "lock", "spill.lock"} {
				if fi, err := os.Stat(filepath.Join(e.stateDir, n)); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: %v, %v; want mode 0600", n, fi.Mode(), err)
				}
			}
		})
	}
}

// TestControlPathThroughLink: a control path the host names through a
// symlink in the writable set (the config file, the state dir, the
// approval command, a PATH entry holding the shell) would be redirected
// for the next call by pointing the link elsewhere: a forged config or
// standing mode, an approver that approves, a shell swapped while the
// approval is awaited. A confined call there is refused (the shell
// check refuses every call), so no command gets to move the link.
func TestControlPathThroughLink(t *testing.T) {
	e := newConfinedEnv(t, "")
	link := func(target, name string) string {
		t.Helper()
		p := filepath.Join(e.workspace, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	approver := filepath.Join(e.dir, "approver.sh")
	if err := os.WriteFile(approver, []byte("#!/bin/sh\necho rejected\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	realBin := filepath.Join(e.dir, "realbin")
	os.Mkdir(realBin, 0o755)
	bash, _ := exec.LookPath("bash")
	if err := os.Symlink(bash, filepath.Join(realBin, "bash")); err != nil {
		t.Fatal(err)
	}
	configLink := link(e.config, "bashcall.toml")
	stateLink := link(e.stateDir, "state")
	os.Mkdir(e.stateDir, 0o700)
	approveLink := link(approver, "approve")
	binLink := link(realBin, "bin")
	withApprover := filepath.Join(e.dir, "approving.toml")
	if err := os.WriteFile(withApprover, []byte(fmt.Sprintf("[approval]\ncommand = [%q]\n", approveLink)), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(e.workspace, "moved")
	move := fmt.Sprintf("ln -sfn /nowhere bashcall.toml state approve bin 2>/dev/null; touch %s", marker)
	for _, c := range []struct {
		name  string
		args  []string
		env   []string
		wants string
	}{
		{"config", []string{"-config", configLink, "-state-dir", e.stateDir}, nil, configLink},
		{"state dir", []string{"-config", e.config, "-state-dir", stateLink}, nil, stateLink},
		{"approval command", []string{"-config", withApprover, "-state-dir", e.stateDir}, nil, approveLink},
		{"shell", []string{"-config", e.config, "-state-dir", e.stateDir}, []string{"PATH=" + binLink + ":" + os.Getenv("PATH")}, "is reached through the symlink " + jsonString(binLink)},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := e.cmd()
			cmd.Args = append([]string{os.Args[0]}, c.args...)
			cmd.Env = append(cmd.Env, c.env...)
			cmd.Stdin = strings.NewReader(bashReq(move, ""))
			out, _ := cmd.Output()
			r := decodeResponse(t, string(out))
			if !r.IsError || !strings.Contains(r.text(), c.wants) {
				t.Errorf("a confined call with the %s through a link in the workspace = %q", c.name, r.text())
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the command ran")
			}
		})
	}
	for _, l := range []string{configLink, stateLink, approveLink, binLink} {
		if target, _ := os.Readlink(l); target == "/nowhere" {
			t.Errorf("%s was pointed elsewhere", l)
		}
	}
}

// TestExecutableThroughLink: the name the host runs bashcall by is a
// control path along with the executable: a symlink on the way to it in
// the workspace (for a one-shot call, and for the calls of an mcp server
// started through it, whose processes get the server's name), or, for a
// bare name found on PATH, a PATH directory searched before it that lies
// in the workspace. A command there could have the host run a bashcall
// of its own next, unconfined. Such a confined call is refused.
func TestExecutableThroughLink(t *testing.T) {
	e := newConfinedEnv(t, "")
	real := filepath.Join(e.dir, "real")
	os.Mkdir(real, 0o755)
	if err := os.Symlink(os.Args[0], filepath.Join(real, "bashcall-test")); err != nil {
		t.Fatal(err)
	}
	tools := filepath.Join(e.workspace, "tools")
	if err := os.Symlink(real, tools); err != nil {
		t.Fatal(err)
	}
	early := filepath.Join(e.workspace, "bin")
	os.Mkdir(early, 0o755)
	refused := "overlaps"
	bare := filepath.Join(real, "bashcall-test")
	// A directory outside the workspace holding a bashcall-test that is a
	// dangling link into it: a command there makes what the host runs.
	dangling := filepath.Join(e.dir, "dangling")
	os.Mkdir(dangling, 0o755)
	if err := os.Symlink(filepath.Join(e.workspace, "planted"), filepath.Join(dangling, "bashcall-test")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, argv0, dir, pathEnv string
		refusedFor                      string // "" for a call that runs
	}{
		{"one-shot", filepath.Join(tools, "bashcall-test"), filepath.Join(tools, "bashcall-test"), "", "", refused},
		{"on PATH", bare, "bashcall-test", "", early + ":" + real, early},
		{"PATH entry through a link", bare, "bashcall-test", "", filepath.Join(tools, "bin") + ":" + real, tools},
		{"PATH entry relative", bare, "bashcall-test", "", ":" + real, refused},
		{"PATH entry empty, run in /", bare, "bashcall-test", "/", ":" + real, ""},
		{"dangling link on PATH", bare, "bashcall-test", "", dangling + ":" + real, refused},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := e.cmd()
			cmd.Path, cmd.Args[0] = c.path, c.argv0
			if c.dir != "" {
				cmd.Dir = c.dir
			}
			if c.pathEnv != "" {
				cmd.Env = append(cmd.Env, "PATH="+c.pathEnv+":"+os.Getenv("PATH"))
			}
			cmd.Stdin = strings.NewReader(sessionCall("echo ran", "S", e.workspace, ""))
			out, _ := cmd.Output()
			r := decodeResponse(t, string(out))
			if c.refusedFor == "" && (r.IsError || r.text() != "ran\n") || c.refusedFor != "" && (!r.IsError || !strings.Contains(r.text(), c.refusedFor)) {
				t.Errorf("a call of bashcall run as %q (PATH %q, in %q) = %q", c.argv0, c.pathEnv, c.dir, r.text())
			}
		})
	}
	t.Run("mcp", func(t *testing.T) {
		c := e.startMCPVia(filepath.Join(tools, "bashcall-test"), "-workspace", e.workspace)
		c.initialize(`{}`)
		r, _ := c.callTool(1, "bash", mcpBashArgs("echo ran", ""), "")
		if !r.IsError || !strings.Contains(r.Content[0].Text, refused) {
			t.Errorf("an mcp call of a server run through a link in the workspace = %+v", r)
		}
		c.close()
	})
}

// TestControlPathDotDot: a config file named with ".." after a directory
// of the workspace is read where the name leads lexically, so a command
// that turns that directory into a symlink cannot have the next call
// read a config of its own.
func TestControlPathDotDot(t *testing.T) {
	e := newConfinedEnv(t, "")
	cfgRoot := filepath.Join(e.dir, "cfgroot")
	os.Mkdir(cfgRoot, 0o755)
	if err := os.WriteFile(filepath.Join(cfgRoot, "config.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(e.workspace, "sub"), 0o755)
	config := e.workspace + "/sub/../../cfgroot/config.toml" // not cleaned
	run := func(command string) string {
		c := e.cmd()
		c.Args = []string{os.Args[0], "-config", config, "-state-dir", e.stateDir, "-text"}
		c.Stdin = strings.NewReader(bashReq(command, ""))
		out, _ := c.Output()
		return string(out)
	}
	forge := `mkdir -p a/b cfgroot && printf '[sandbox]\nmode = "danger-full-access"\n' > cfgroot/config.toml && rm -rf sub && ln -s a/b sub && echo swapped`
	if out := run(forge); !strings.HasPrefix(out, "swapped\n") {
		t.Fatalf("the swap: %q", out)
	}
	outside := filepath.Join(e.dir, "outside")
	run("touch " + outside)
	if _, err := os.Stat(outside); err == nil {
		t.Error("the next call ran unconfined, with the command's config")
	}
}
