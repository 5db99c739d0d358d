package main

// Escalation and standing modes (PROTOCOL.md section 7).
//
// An escalating call is decided, in this order, by [approval] policy =
// "never" (rejected), the request's "approval" (set by the host after asking
// a person), the [approval] command, and otherwise answered with
// approvalRequired. A grant covers the one call that asked and is never
// stored. A session's standing mode is stored in the state dir, which no
// sandboxed command can write.

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// approve decides an escalation; nil means allowed once.
func (inv *invocation) approve(req *request, a *bashArgs, resp *response) error {
	var answer string
	switch {
	case inv.cfg.Approval.Policy == "never":
		answer = approvalRejected
	case req.Approval != "":
		answer = req.Approval
	case len(inv.cfg.Approval.Command) > 0:
		var err error
		if answer, err = inv.askApprover(req.Raw); err != nil {
			return err
		}
	}
	switch answer {
	case approvalAllowed:
		return nil
	case approvalRejected:
		return errRejected(a.Escalate)
	case approvalCancelled:
		return errCancelled(a.Escalate)
	}
	resp.ApprovalRequired = &approvalRequired{Mode: a.Escalate, Justification: a.Justification,
		Command: a.Command, Reason: "escalate sandbox to " + a.Escalate + ": " + a.Justification}
	return errNoApprovalChannel(a.Escalate)
}

// askApprover runs the [approval] command with the request on stdin and
// reads one word. A failure, a hang past timeout_ms or any other answer
// is no answer (""). An abort stops it and aborts the call.
func (inv *invocation) askApprover(request []byte) (string, error) {
	argv := inv.cfg.Approval.Command
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdin = bytes.NewReader(request)
	cmd.Stdout = &limitedWriter{w: &out, n: 4096}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", nil
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(time.Duration(inv.cfg.TimeoutMs) * time.Millisecond)
	defer timer.Stop()
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // stragglers of the approver
	select {
	case err := <-done:
		if err != nil {
			return "", nil
		}
		return strings.TrimSpace(out.String()), nil
	case <-timer.C:
	case <-inv.abort:
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return "", errAborted()
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	return "", nil
}

// limitedWriter keeps the first n bytes and discards the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(l.n, len(p))
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// standingMode is the session's stored mode, else the configured default.
func (inv *invocation) standingMode(sessionID string) string {
	if sessionID != "" {
		var b []byte
		f, err := openOwn(filepath.Join(inv.sessionDir(ownerKey(sessionID)), "mode"), os.O_RDONLY)
		if err == nil {
			b, err = io.ReadAll(io.LimitReader(f, 64))
			f.Close()
		}
		if m := strings.TrimSpace(string(b)); err == nil && validMode(m) {
			return m
		}
	}
	return inv.cfg.Sandbox.Mode
}

// setStandingMode stores (or, for "", clears) a session's mode.
func (inv *invocation) setStandingMode(sessionID, mode string) error {
	dir, err := inv.ensureSessionDir(ownerKey(sessionID))
	if err != nil {
		return err
	}
	p := filepath.Join(dir, "mode")
	if mode == "" {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return writeFileAtomic(p, []byte(mode+"\n"))
}
