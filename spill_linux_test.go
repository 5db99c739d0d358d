package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSpillConcurrent: calls printing together more than the cap, all live
// at once: none loses a copy it offers, those that cannot fit say
// (unavailable) and leave no file, and the total never passes the cap.
func TestSpillConcurrent(t *testing.T) {
	e := newTestEnv(t, spillConfig)
	gate := filepath.Join(e.workspace, "go")
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 6)
	errs := make([]error, 6)
	var cmds []*exec.Cmd
	for i := range outs {
		ready := filepath.Join(e.workspace, fmt.Sprint("ready-", i))
		cmd := fmt.Sprintf("%s; touch %s; while [ ! -e %s ]; do sleep 0.02; done", printN(fmt.Sprint(i), 80000), ready, gate)
		c := e.cmd()
		cmds = append(cmds, c)
		c.Stdin = strings.NewReader(bashReq(cmd, `"timeoutMs":60000`))
		c.Stdout = &outs[i]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Wait()
		}()
	}
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) })
	stop := make(chan struct{})
	sampled := make(chan int64)
	go func() {
		var peak int64
		for {
			select {
			case <-stop:
				sampled <- peak
				return
			default:
			}
			peak = max(peak, copiesSize(e.stateDir))
			time.Sleep(time.Millisecond)
		}
	}()
	waitFor(t, 30*time.Second, "every call to print", func() bool {
		n, _ := filepath.Glob(filepath.Join(e.workspace, "ready-*"))
		return len(n) == len(outs)
	})
	// A command that printed has not been read yet: a call still copying
	// once the first ones end could evict their finished copies, as it
	// may. Every call is all read (its command's stdout pipe empty) and
	// copied (the copies' size settled) before any ends.
	waitFor(t, 30*time.Second, "every call's output read", func() bool {
		for _, c := range cmds {
			for _, kid := range childrenOf(c.Process.Pid) {
				if n, err := unreadInPipe(kid, 1); err != nil || n > 0 {
					return false
				}
			}
		}
		return true
	})
	for was := int64(-1); ; {
		now := copiesSize(e.stateDir)
		if now == was {
			break
		}
		was = now
		time.Sleep(100 * time.Millisecond)
	}
	os.WriteFile(gate, nil, 0o600)
	wg.Wait()
	close(stop)
	if peak := <-sampled; peak > 250000 {
		t.Errorf("the copies held %d bytes at one point, over the 250000 cap", peak)
	}
	offered, unavailable := 0, 0
	for i := range outs {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		r := decodeResponse(t, outs[i].String())
		s := stdoutResult(t, r)
		switch {
		case s.SpillPath != "":
			offered++
			if b, err := os.ReadFile(s.SpillPath); err != nil || string(b) != wantN(fmt.Sprint(i), 80000) {
				t.Errorf("call %d offered %s: %d bytes, %v; want the whole stream", i, s.SpillPath, len(b), err)
			}
		case strings.HasSuffix(r.text(), markerTruncated(textUnavailable)):
			unavailable++
		default:
			t.Errorf("call %d: neither a spill path nor (unavailable): %q", i, r.text())
		}
	}
	if offered == 0 || unavailable == 0 {
		t.Errorf("%d copies offered, %d unavailable; want some of each (6 x 80000 bytes against a 250000 cap)", offered, unavailable)
	}
	if files := spillFiles(e.stateDir); len(files) != offered {
		t.Errorf("%d spill files left for %d offered: %v", len(files), offered, files)
	}
}

// unreadInPipe is how many bytes wait in the pipe that is descriptor fd of
// process pid, opened anew through /proc.
func unreadInPipe(pid string, fd int) (int, error) {
	f, err := os.OpenFile(fmt.Sprintf("/proc/%s/fd/%d", pid, fd), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ)
}
