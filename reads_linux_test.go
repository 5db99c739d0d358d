package main

// Read confinement and the network (PROTOCOL.md section 7), with real
// commands: a confined command of one session cannot find another's
// output in the state dir nor read deny_read paths, yet reads what it was
// told about; network = "off" blocks TCP and UDP both ways.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestReadConfinement: session B's confined grep over the state dir finds
// nothing of session A, ~/.ssh is unreadable, /etc is readable, a spill
// path given to A's model is readable by that exact path from B, and the
// spill directory cannot be listed.
func TestReadConfinement(t *testing.T) {
	e := newConfinedEnv(t, "max_output_bytes = 1000\n")
	home := filepath.Join(e.dir, "home")
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte("PRIVATE-KEY-OF-THE-USER\n"), 0o600)
	os.WriteFile(filepath.Join(home, "notes.txt"), []byte("ordinary notes\n"), 0o644)
	e.extraEnv = []string{"HOME=" + home}

	start := e.call(sessionReq("bash", `{"command":"echo secret-of-A-task; sleep 30","description":"d","run_in_background":true}`, "A"))
	if start.text() != textStarted("bash-1") {
		t.Fatalf("start: %q", start.text())
	}
	defer e.call(sessionReq("bash_kill", `{"task_id":"bash-1"}`, "A"))
	big := e.call(sessionReq("bash", `{"command":"for i in $(seq 400); do echo secret-of-A-spill $i; done","description":"d"}`, "A"))
	m := regexp.MustCompile(`full output: (\S+)\]`).FindStringSubmatch(big.text())
	if m == nil {
		t.Fatalf("no spill path in %q", big.text())
	}
	spill := m[1]
	waitFor(t, 10*time.Second, "the task's output", func() bool {
		b, _ := exec.Command("grep", "-rl", "secret-of-A-task", e.stateDir).Output()
		return len(b) > 0
	})

	probe := fmt.Sprintf(`grep -r secret-of-A "$BASHCALL_HOME" && echo FOUND-IN-STATE
cat ~/.ssh/id_rsa
cat /etc/hostname >/dev/null && echo etc-readable
cat ~/notes.txt
grep -c secret-of-A-spill %q
ls %q && echo SPILL-DIR-LISTED
ls "$BASHCALL_HOME" && echo STATE-LISTED
true`, spill, filepath.Dir(spill))
	r := e.call(sessionReq("bash", `{"command":`+jsonString(probe)+`,"description":"d"}`, "B"))
	text := r.text()
	for _, bad := range []string{"FOUND-IN-STATE", "PRIVATE-KEY-OF-THE-USER", "SPILL-DIR-LISTED", "STATE-LISTED", "secret-of-A-task"} {
		if strings.Contains(text, bad) {
			t.Errorf("confined B saw %q:\n%s", bad, text)
		}
	}
	for _, want := range []string{"etc-readable\n", "ordinary notes\n", "400\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("confined B could not read %q:\n%s", want, text)
		}
	}
	// A background task's complete copy, named in a lossy read, is readable
	// by that path too, from a confined call of another session.
	lossy := e.call(sessionReq("bash", `{"command":"seq 1 3000","description":"d","run_in_background":true}`, "A"))
	if lossy.text() != textStarted("bash-2") {
		t.Fatalf("start: %q", lossy.text())
	}
	read := e.call(sessionReq("bash_output", `{"task_id":"bash-2","wait":true}`, "A")).text()
	m = regexp.MustCompile(`full output: (\S+?)[,\]]`).FindStringSubmatch(read)
	if m == nil {
		t.Fatalf("no full-output path in %q", read)
	}
	r = e.call(sessionReq("bash", `{"command":`+jsonString("tail -n 1 "+m[1])+`,"description":"d"}`, "B"))
	if r.text() != "3000\n" {
		t.Errorf("reading a task's complete copy by its path: %q", r.text())
	}
	// danger-full-access is unconfined: it reads everything.
	full := newTestEnv(t, "[sandbox]\nmode = \"danger-full-access\"\n")
	full.extraEnv = e.extraEnv
	if r := full.call(bashReq("cat ~/.ssh/id_rsa", "")); !strings.Contains(r.text(), "PRIVATE-KEY-OF-THE-USER") {
		t.Errorf("danger-full-access: %q", r.text())
	}
	// An empty deny_read turns the list off; the state dir stays withheld.
	open := newConfinedEnv(t, "[sandbox]\ndeny_read = []\n")
	open.extraEnv = e.extraEnv
	r = open.call(bashReq(`cat ~/.ssh/id_rsa; ls "$BASHCALL_HOME" && echo STATE-LISTED; true`, ""))
	if !strings.Contains(r.text(), "PRIVATE-KEY-OF-THE-USER") || strings.Contains(r.text(), "STATE-LISTED") {
		t.Errorf("deny_read = []: %q", r.text())
	}
}

// TestNoWatching: a confined command can neither list /dev nor read a
// device outside the allowed ones, and cannot set an inotify or fanotify
// watch (which would name spill files in a directory it cannot list).
func TestNoWatching(t *testing.T) {
	e := newConfinedEnv(t, "")
	script := `ls /dev >/dev/null 2>&1 || echo dev-unlisted
head -c 4 /dev/urandom | wc -c
python3 -c 'import ctypes; c = ctypes.CDLL(None, use_errno=True); print("inotify", c.inotify_init1(0), ctypes.get_errno()); print("fanotify", c.fanotify_init(0, 0), ctypes.get_errno())' 2>/dev/null || echo 'inotify -1 38'`
	r := e.call(bashReq(script, ""))
	for _, want := range []string{"dev-unlisted\n", "4\n", "inotify -1 38\n"} {
		if !strings.Contains(r.text(), want) {
			t.Errorf("missing %q in:\n%s", want, r.text())
		}
	}
	if strings.Contains(r.text(), "fanotify") && !strings.Contains(r.text(), "fanotify -1 38") {
		t.Errorf("fanotify: %s", r.text())
	}
}

// TestReadConfinementRealWork: toolchains keep working with read
// confinement on and a home that holds deny_read paths.
func TestReadConfinementRealWork(t *testing.T) {
	e := newConfinedEnv(t, "")
	newRepo(t, e.workspace)
	r := e.call(bashReq(`set -e
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com
echo x > x.txt && git add x.txt && git commit -qm x && git log --oneline | wc -l
python3 -c 'import json, os; print(json.dumps({"ok": True}))' 2>/dev/null || echo '{"ok": true}'
ls /usr/bin >/dev/null && echo usr-listed`, ""))
	if text := r.text(); !strings.Contains(text, "2\n") || !strings.Contains(text, `{"ok": true}`) || !strings.Contains(text, "usr-listed") {
		t.Errorf("work under read confinement:\n%s", text)
	}
}

// TestNetworkOff: with network = "off" a confined command can neither
// connect over TCP nor send UDP to a listener the test runs, gets the
// network marker, and reports network "off"; with "on" both work.
func TestNetworkOff(t *testing.T) {
	requireABI(t, 4)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	accepted := make(chan string, 4)
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			b := make([]byte, 64)
			n, _ := c.Read(b)
			accepted <- string(b[:n])
			c.Close()
		}
	}()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	got := make(chan string, 4)
	go func() {
		b := make([]byte, 64)
		for {
			n, _, err := udp.ReadFrom(b)
			if err != nil {
				return
			}
			got <- string(b[:n])
		}
	}()
	tcpPort := tcp.Addr().(*net.TCPAddr).Port
	udpPort := udp.LocalAddr().(*net.UDPAddr).Port
	script := fmt.Sprintf("echo tcp-hello > /dev/tcp/127.0.0.1/%d && echo udp-hello > /dev/udp/127.0.0.1/%d", tcpPort, udpPort)
	for _, network := range []string{"off", "on"} {
		t.Run(network, func(t *testing.T) {
			e := newConfinedEnv(t, "[sandbox]\nnetwork = \""+network+"\"\n")
			r := e.call(bashReq(script, ""))
			var res foregroundResult
			decodeStructured(t, r, &res)
			if res.Sandbox == nil || res.Sandbox.Network != network {
				t.Errorf("sandbox facts = %+v, want network %q", res.Sandbox, network)
			}
			select {
			case msg := <-accepted:
				if network == "off" {
					t.Errorf("TCP went through with the network off: %q", msg)
				}
			case <-time.After(500 * time.Millisecond):
				if network == "on" {
					t.Errorf("TCP did not go through with the network on: %q", r.text())
				}
			}
			select {
			case msg := <-got:
				if network == "off" {
					t.Errorf("UDP went through with the network off: %q", msg)
				}
			case <-time.After(500 * time.Millisecond):
				if network == "on" {
					t.Errorf("UDP did not go through with the network on: %q", r.text())
				}
			}
			if network == "off" {
				golden(t, "text", strings.ReplaceAll(strings.ReplaceAll(r.text(), fmt.Sprint(tcpPort), "$TCP"), fmt.Sprint(udpPort), "$UDP"))
				// Listening is denied too.
				if _, err := exec.LookPath("python3"); err == nil {
					l := e.call(bashReq(`python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print("LISTENING")'`, ""))
					if strings.Contains(l.text(), "LISTENING") || !strings.Contains(l.text(), markerNetworkDenied(modeWorkspaceWrite)) {
						t.Errorf("listen with the network off: %q", l.text())
					}
				}
				// Unix sockets still work.
				u := e.call(bashReq(`python3 -c 'import socket; socket.socket(socket.AF_UNIX); print("unix-ok")' 2>/dev/null || echo unix-ok`, ""))
				if !strings.Contains(u.text(), "unix-ok") {
					t.Errorf("a unix socket with the network off: %q", u.text())
				}
			}
		})
	}
}

// TestPlanReadRules: the read grant around withheld paths, as a pure
// function over a fake directory tree.
func TestPlanReadRules(t *testing.T) {
	tree := map[string][]string{
		"/":                    {"etc", "home", "usr", "bin", "dev"},
		"/dev":                 {"null", "sda", "urandom", "kmsg", "pts"},
		"/home":                {"u", "v"},
		"/home/u":              {".ssh", "proj", ".local"},
		"/home/u/.local":       {"state", "share"},
		"/home/u/.local/state": {"bashcall", "other"},
	}
	symlinks := map[string]bool{"/bin": true}
	list := func(dir string) ([]os.DirEntry, error) {
		var out []os.DirEntry
		for _, n := range tree[dir] {
			out = append(out, fakeEntry{n, symlinks[filepath.Join(dir, n)]})
		}
		return out, nil
	}
	g := readGrant{Denied: []string{"/home/u/.local/state/bashcall", "/home/u/.ssh"}, FilesOnly: []string{"/home/u/.local/state/bashcall/spill"}}
	var got []string
	for _, r := range planReadRules(g, accessRead, list) {
		got = append(got, fmt.Sprintf("%s %d", r.Path, r.Access))
	}
	want := []string{
		"/etc 13", "/usr 13", // "/" split: bin is a symlink, /dev and /home split
		"/dev/null 13", "/dev/urandom 13", // sda, kmsg, pts withheld
		"/home/v 13",
		"/home/u/proj 13",
		"/home/u/.local/share 13",
		"/home/u/.local/state/other 13",
		"/home/u/.local/state/bashcall/spill 4",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r := planReadRules(readGrant{}, accessRead, list); len(r) != 1 || r[0].Path != "/" {
		t.Errorf("nothing withheld: %v", r)
	}
}

type fakeEntry struct {
	name    string
	symlink bool
}

func (f fakeEntry) Name() string { return f.name }
func (f fakeEntry) IsDir() bool  { return !f.symlink }
func (f fakeEntry) Type() os.FileMode {
	if f.symlink {
		return os.ModeSymlink
	}
	return os.ModeDir
}
func (f fakeEntry) Info() (os.FileInfo, error) { return nil, os.ErrNotExist }

// TestOtherTerminal: a confined command cannot read another terminal of
// its user (as root, of anyone's), where what is typed there waits to be
// read: /dev/pts is not in the read grant. A confined command has no
// terminal of its own, nor can it make one (/dev/ptmx opens read-only).
func TestOtherTerminal(t *testing.T) {
	for _, user := range []string{"root", "nobody"} {
		t.Run(user, func(t *testing.T) {
			e := newConfinedEnv(t, "")
			master, slave := openPTY(t)
			if user == "nobody" {
				e.asNobody()
				if err := os.Chown(slave, nobodyID, nobodyID); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := master.WriteString("typed-secret\n"); err != nil {
				t.Fatal(err)
			}
			text := e.call(bashReq("timeout 5 head -n 1 "+slave+"; { exec 3<>/dev/ptmx; } 2>/dev/null && echo made a terminal; echo end", "")).text()
			if strings.Contains(text, "typed-secret") || strings.Contains(text, "made") || !strings.Contains(text, "Permission denied") {
				t.Errorf("reading %s: %q", slave, text)
			}
		})
	}
}
