package main

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAbort: SIGTERM to bashcall stops the command's whole tree and
// answers "Error: command aborted".
func TestAbort(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(signalName(sig), func(t *testing.T) {
			e := newTestEnv(t, "grace_ms = 300\n")
			pidFile := filepath.Join(e.workspace, "pids")
			c := e.cmd()
			c.Stdin = strings.NewReader(bashReq("setsid sleep 300 & echo $! $$ > "+pidFile+"; sleep 300", ""))
			var out bytes.Buffer
			c.Stdout = &out
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			pids := readPIDs(t, pidFile)
			c.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("exit: %v", err)
				}
			case <-time.After(10 * time.Second):
				c.Process.Kill()
				t.Fatal("bashcall did not answer the abort")
			}
			r := decodeResponse(t, out.String())
			if !r.IsError || r.text() != "Error: command aborted" {
				t.Errorf("response = %+v", r)
			}
			for _, pid := range pids {
				if pidAlive(pid) {
					t.Errorf("pid %d survived the abort", pid)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
	}
}

// TestSignalBeforeCall: a SIGTERM or SIGINT that comes while bashcall
// still waits for its request ends it, killed by that signal and having
// written nothing, however soon after its start, as an uncaught signal
// does; catching signals for the call must not make it linger.
func TestSignalBeforeCall(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		for _, after := range []time.Duration{0, 10 * time.Millisecond, 300 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/%v", signalName(sig), after), func(t *testing.T) {
				e := newTestEnv(t, "[sandbox]\nmode = \"danger-full-access\"\n")
				c := e.cmd()
				stdin, out := startHeld(t, c) // stdin held open: the request never ends
				defer stdin.Close()
				time.Sleep(after)
				c.Process.Signal(sig)
				ws := endOf(t, c)
				if !ws.Signaled() || ws.Signal() != sig {
					t.Errorf("bashcall ended with %v, want killed by %v", ws, signalName(sig))
				}
				if out.Len() != 0 {
					t.Errorf("bashcall wrote %q", out.String())
				}
			})
		}
	}
}

// TestIgnoredSIGINTBeforeCall: a SIGINT ignored since bashcall started
// stays ignored until the call runs, and the call is answered.
func TestIgnoredSIGINTBeforeCall(t *testing.T) {
	e := newTestEnv(t, "[sandbox]\nmode = \"danger-full-access\"\n")
	bc := e.cmd()
	c := exec.Command("bash", append([]string{"-c", `trap "" INT; exec "$0" "$@"`}, bc.Args...)...)
	c.Dir, c.Env = bc.Dir, bc.Env
	stdin, out := startHeld(t, c)
	for i := 0; i < 3; i++ {
		time.Sleep(100 * time.Millisecond)
		c.Process.Signal(syscall.SIGINT)
	}
	io.WriteString(stdin, bashReq("echo answered", ""))
	stdin.Close()
	if ws := endOf(t, c); !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("bashcall ended with %v, want exit status 0", ws)
	}
	if r := decodeResponse(t, out.String()); r.IsError || r.text() != "answered\n" {
		t.Errorf("response = %+v", r)
	}
}

// TestSignalAroundArming: a SIGTERM that comes at any moment around the
// arming of a call, in a process started for it or in a warm child, has
// one of two outcomes: bashcall ended by the signal, having written
// nothing, or the call answered as aborted. Never a hang, another exit,
// a command that ran to its end or half a response, and never a command
// left running: one started just before bashcall ended dies with it
// (its parent-death signal).
func TestSignalAroundArming(t *testing.T) {
	e := newTestEnv(t, "[sandbox]\nmode = \"danger-full-access\"\n")
	killed, aborted := 0, 0
	for i := 0; i < 60; i++ {
		var args []string
		if i%2 == 1 {
			args = []string{"-warm"}
		}
		c := e.cmd(args...)
		stdin, out := startHeld(t, c)
		if i%2 == 1 {
			time.Sleep(20 * time.Millisecond) // its warm-up is done or under way
		}
		io.WriteString(stdin, bashReq("sleep 5", ""))
		stdin.Close()
		time.Sleep(time.Duration(i%10) * 300 * time.Microsecond)
		c.Process.Signal(syscall.SIGTERM)
		ws := endOf(t, c)
		switch {
		case ws.Signaled() && ws.Signal() == syscall.SIGTERM && out.Len() == 0:
			killed++
		case ws.Exited() && ws.ExitStatus() == 0:
			if r := decodeResponse(t, out.String()); !r.IsError || r.text() != "Error: command aborted" {
				t.Errorf("round %d: answered %+v", i, r)
			}
			aborted++
		default:
			t.Errorf("round %d: ended with %v, having written %q", i, ws, out.String())
		}
		waitFor(t, 2*time.Second, "the round's command to be gone", func() bool { return len(procsInDir(e.workspace)) == 0 })
	}
	t.Logf("%d killed before the call was armed, %d calls aborted", killed, aborted)
	if aborted == 0 {
		t.Error("no call was armed before its signal: the test did not reach the race")
	}
}

// endOf waits at most 10 seconds for c to end, and then for os/exec to
// have copied all of its stdout.
func endOf(t *testing.T, c *exec.Cmd) syscall.WaitStatus {
	t.Helper()
	ws := waitExit(t, c.Process)
	c.Wait() // reaped already: this waits for the copy only
	return ws
}

// startHeld starts c with a pipe for its stdin, which the caller writes
// and closes, and its stdout copied into a buffer (read it after endOf).
func startHeld(t *testing.T, c *exec.Cmd) (io.WriteCloser, *bytes.Buffer) {
	t.Helper()
	stdin, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := new(bytes.Buffer)
	c.Stdout = out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return stdin, out
}
