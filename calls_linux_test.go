package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// callRecords lists the call records of a state dir.
func callRecords(stateDir string) []string {
	names, _ := filepath.Glob(filepath.Join(stateDir, "calls", "*.json"))
	return names
}

// TestWarmChildCallRecord: a warm child makes its call record while it
// waits, in the state dir its settings name then. Its call uses that very
// file when the settings name the same state dir once the request is in,
// and makes one in the other state dir otherwise (removing the first).
// No record is left once the call is answered, nor by a call that runs no
// command.
func TestWarmChildCallRecord(t *testing.T) {
	t.Run("no command", func(t *testing.T) {
		e := newTestEnv(t, "")
		warmOnce(t, e)
		c := e.cmd("-warm")
		stdin, out := startWaiting(t, c)
		if r, _ := filepath.Glob(filepath.Join(e.stateDir, "calls", "*.json")); len(r) != 1 {
			t.Fatalf("records while the child waits: %v, want its own", r)
		}
		io.WriteString(stdin, sessionReq("bash_list", "{}", "A"))
		stdin.Close()
		if ws := waitExit(t, c.Process); !ws.Exited() || ws.ExitStatus() != 0 {
			t.Fatalf("bashcall ended with %v", ws)
		}
		if r := decodeResponse(t, out()); r.IsError {
			t.Fatalf("bash_list: %+v", r)
		}
		if left, _ := filepath.Glob(filepath.Join(e.stateDir, "calls", "*.json")); len(left) != 0 {
			t.Errorf("records left after a call that ran no command: %v", left)
		}
	})
	for _, moved := range []bool{false, true} {
		t.Run(fmt.Sprintf("moved=%v", moved), func(t *testing.T) {
			e := newTestEnv(t, "")
			stateA, stateB := filepath.Join(e.dir, "state-a"), filepath.Join(e.dir, "state-b")
			config := func(state string) {
				if err := os.WriteFile(e.config, []byte(fmt.Sprintf("state_dir = %q\n[sandbox]\nmode = \"danger-full-access\"\n", state)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			config(stateA)
			if err := os.MkdirAll(filepath.Join(stateA, "calls"), 0o700); err != nil { // as a first call leaves it
				t.Fatal(err)
			}
			os.Chmod(stateA, 0o700)
			c := e.cmd("-warm")
			c.Args = []string{os.Args[0], "-config", e.config, "-warm"} // the state dir is the config's
			stdin, out := startWaiting(t, c)
			records := func(state string) []string {
				names, _ := filepath.Glob(filepath.Join(state, "calls", "*.json"))
				return names
			}
			prepared := records(stateA)
			if len(prepared) != 1 || !strings.HasPrefix(filepath.Base(prepared[0]), fmt.Sprintf("%d-", c.Process.Pid)) {
				t.Fatalf("records while the child waits: %v, want one of its own", prepared)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(prepared[0], &st); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("%d\n", st.Ino)
			if moved {
				config(stateB)
				want = fmt.Sprintf("%d %s\n", 0, filepath.Base(prepared[0]))
			}
			// The command reports the record of its call as it runs.
			cmd := fmt.Sprintf(`stat -c %%i %q`, prepared[0])
			if moved {
				cmd = fmt.Sprintf(`echo $(ls %q | wc -l) $(ls %q)`, filepath.Join(stateA, "calls"), filepath.Join(stateB, "calls"))
			}
			io.WriteString(stdin, bashReq(cmd, ""))
			stdin.Close()
			if ws := waitExit(t, c.Process); !ws.Exited() || ws.ExitStatus() != 0 {
				t.Fatalf("bashcall ended with %v", ws)
			}
			if got := decodeResponse(t, out()).text(); got != want {
				t.Errorf("the call's record as its command ran: %q, want %q", got, want)
			}
			if left := append(records(stateA), records(stateB)...); len(left) != 0 {
				t.Errorf("records left after the call: %v", left)
			}
		})
	}
}

// TestRemovedPreparedRecord: a record made ahead that is gone from its
// path when the call comes (calls/ wiped meanwhile) is not used: the call
// records its tree in a file a sweep can find.
func TestRemovedPreparedRecord(t *testing.T) {
	e := newTestEnv(t, "")
	warmOnce(t, e) // calls/ exists
	c := e.cmd("-warm")
	stdin, out := startWaiting(t, c)
	prepared := callRecords(e.stateDir)
	if len(prepared) != 1 {
		t.Fatalf("records while the child waits: %v", prepared)
	}
	os.Remove(prepared[0])
	io.WriteString(stdin, bashReq("cat "+filepath.Join(e.stateDir, "calls")+"/*.json", ""))
	stdin.Close()
	waitExit(t, c.Process)
	if got := decodeResponse(t, out()).text(); !strings.Contains(got, `"pipes":[`) {
		t.Errorf("the call's record as its command ran: %q, want its tree", got)
	}
}

// TestWarmChildTouchesNothing: before its request a waiting child changes
// nothing in the state dir but its own record (here not even that: the
// state dir is open to others, which its call repairs) and says nothing.
func TestWarmChildTouchesNothing(t *testing.T) {
	e := newTestEnv(t, "")
	warmOnce(t, e)
	if err := os.Chmod(e.stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := e.cmd("-warm")
	stderr, err := os.Create(filepath.Join(e.dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = stderr
	stdin, _ := startWaiting(t, c)
	stderr.Close()
	fi, err := os.Stat(e.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	said, _ := os.ReadFile(stderr.Name())
	if fi.Mode().Perm() != 0o755 || len(callRecords(e.stateDir)) != 0 || len(said) != 0 {
		t.Errorf("before its request, a waiting child left the state dir at %04o with records %v, and said %q", fi.Mode().Perm(), callRecords(e.stateDir), said)
	}
	stdin.Close()
	waitExit(t, c.Process)
}

// TestWaitingChildEndsWithoutRecord: a waiting warm child ended by
// SIGTERM removes the record it made ahead.
func TestWaitingChildEndsWithoutRecord(t *testing.T) {
	e := newTestEnv(t, "")
	warmOnce(t, e)
	c := e.cmd("-warm")
	startWaiting(t, c)
	if len(callRecords(e.stateDir)) != 1 {
		t.Fatalf("records while the child waits: %v", callRecords(e.stateDir))
	}
	c.Process.Signal(syscall.SIGTERM)
	if ws := waitExit(t, c.Process); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("ended with %v, want killed by SIGTERM", ws)
	}
	if left := callRecords(e.stateDir); len(left) != 0 {
		t.Errorf("records left: %v", left)
	}
}

// TestServersStopWithoutRecords: serve and mcp stopped with a warm child
// waiting (which they kill) leave no call record. The state dir exists
// before the server starts: a warm child makes its record only in a state
// dir that is there, and the child started with the server may still be
// starting when the first call comes, which then runs in a child of its
// own and leaves the first one waiting, with no record, for the next.
func TestServersStopWithoutRecords(t *testing.T) {
	t.Run("mcp", func(t *testing.T) {
		e := newTestEnv(t, "")
		warmOnce(t, e)
		m := e.startMCP()
		m.initialize(`{}`)
		if r, _ := m.callTool(1, "bash", `{"command":"true","description":"d"}`, ""); r.IsError {
			t.Fatalf("%+v", r)
		}
		waitFor(t, 10*time.Second, "the next child's record", func() bool { return len(callRecords(e.stateDir)) == 1 })
		m.close()
		if left := callRecords(e.stateDir); len(left) != 0 {
			t.Errorf("records left once mcp stopped: %v", left)
		}
	})
	t.Run("serve", func(t *testing.T) {
		e := newTestEnv(t, "")
		warmOnce(t, e)
		dir := filepath.Join(e.dir, "spool")
		s := e.serve(dir)
		drop(t, dir, "a.json", bashReq("true", ""))
		awaitResponse(t, dir, "a.json")
		waitFor(t, 10*time.Second, "the next child's record", func() bool { return len(callRecords(e.stateDir)) == 1 })
		if err := s.stop(t, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if left := callRecords(e.stateDir); len(left) != 0 {
			t.Errorf("records left once serve stopped: %v", left)
		}
	})
}

// TestClosedStdoutLeavesNoRecord: a call whose host has closed its end of
// stdout dies of SIGPIPE on its response; its record is gone by then.
func TestClosedStdoutLeavesNoRecord(t *testing.T) {
	e := newTestEnv(t, "")
	c := e.cmd()
	c.Stdin = strings.NewReader(bashReq("sleep 0.3", ""))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stdout = w
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r.Close()
	if ws := waitExit(t, c.Process); !ws.Signaled() || ws.Signal() != syscall.SIGPIPE {
		t.Logf("ended with %v", ws)
	}
	if left := callRecords(e.stateDir); len(left) != 0 {
		t.Errorf("records left: %v", left)
	}
}

// warmOnce runs one call, so that the state dir and its calls/ exist.
func warmOnce(t *testing.T, e *testEnv) {
	t.Helper()
	if r := e.call(bashReq("true", "")); r.IsError {
		t.Fatalf("%+v", r)
	}
}

// TestSweepFromDeadCallsSession: a call made from inside the session of
// a dead call's leftovers (a hook that a killed call's command started
// with setsid runs bashcall) stops those leftovers but keeps its own
// command: the sweep is done before the call starts anything, since it
// spares only bashcall and its ancestors.
func TestSweepFromDeadCallsSession(t *testing.T) {
	e := newTestEnv(t, "")
	defer killInDir(e.workspace)
	b := e.cmd()
	inner := filepath.Join(e.dir, "inner.sh")
	out := filepath.Join(e.dir, "inner.json")
	os.WriteFile(filepath.Join(e.dir, "inner-req.json"), []byte(bashReq("sleep 0.5; echo inner-done", "")), 0o600)
	started := filepath.Join(e.dir, "started")
	script := ": > " + shellQuote(started) + "; sleep 1000 & sleep 0.5\nBASHCALL_TEST_MAIN=1 exec"
	for _, a := range b.Args {
		script += " " + shellQuote(a)
	}
	script += " < " + shellQuote(filepath.Join(e.dir, "inner-req.json")) + " > " + shellQuote(out) + " 2>&1\n"
	os.WriteFile(inner, []byte(script), 0o700)
	c := e.cmd()
	c.Stdin = strings.NewReader(bashReq("setsid bash "+shellQuote(inner)+" & exec sleep 1000", ""))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the hook to start", func() bool { _, err := os.Stat(started); return err == nil })
	c.Process.Kill()
	c.Wait()
	waitFor(t, 10*time.Second, "the inner call's answer", func() bool {
		b, _ := os.ReadFile(out)
		return strings.HasSuffix(string(b), "}\n")
	})
	answer, _ := os.ReadFile(out)
	if r := decodeResponse(t, string(answer)); r.IsError || r.text() != "inner-done\n" {
		t.Errorf("the inner call answered %q", r.text())
	}
	waitFor(t, 5*time.Second, "the dead call's leftovers to be stopped", func() bool { return len(procsInDir(e.workspace)) == 0 })
}
