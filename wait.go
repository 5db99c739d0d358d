package main

// bashcall wait: an idle host learns that a background task settled
// without a model-visible call (PROTOCOL.md section 10).
//
// The notices are the ones a response would carry (takeNotices), taken
// with the same exactly-once removal of the pending marker, so a notice
// reaches either wait or a response, never both. The wait costs nothing
// while nothing happens: inotify on the session's pending directory (a
// new task) and on each unsettled task's directory (its status.json), and
// a pidfd on each task's supervisor (one that dies unrecorded is settled
// by the look that follows, as every reader of a task does).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
)

// waitResult is what wait prints.
type waitResult struct {
	Notices []string `json:"notices"`
}

// runWait blocks until a task of the session has a completion notice, or
// -timeout passes (no -timeout: until one does), and prints the notices.
func runWait(args, environ []string, stdout, stderr io.Writer) error {
	var c commonFlags
	fs := newFlagSet("wait", stderr, &c)
	sessionFlag := fs.String("session", "", "the session `ID`")
	timeoutFlag := fs.String("timeout", "", "give up after `DURATION` (default: wait until a notice)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if err := checkSessionFlag(*sessionFlag); err != nil {
		return usageError{fmt.Errorf("wait: %w", err)}
	}
	timeout := time.Duration(-1)
	if *timeoutFlag != "" {
		d, err := parseDuration(*timeoutFlag)
		if err != nil {
			return usageError{fmt.Errorf("wait: -timeout: %w", err)}
		}
		timeout = d
	}
	inv, err := loadSettings(&c, environ, true)
	if err != nil {
		return err
	}
	key := ownerKey(*sessionFlag)
	if _, err := inv.ensureSessionDir(key); err != nil {
		return err
	}
	// Short of descriptors, a task whose supervisor died could not be
	// settled: the wait would not see its notice until it timed out.
	if err := spareDescriptors(waitDescriptors); err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	notices := inv.waitNotices(key, timeout)
	b, err := json.Marshal(waitResult{Notices: append([]string{}, notices...)})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

// checkSessionFlag applies a request's rules for a session id.
func checkSessionFlag(id string) error {
	switch {
	case id == "":
		return errors.New("-session is required")
	case len(id) > maxSessionIDBytes:
		return fmt.Errorf("-session is longer than %d bytes", maxSessionIDBytes)
	case strings.ContainsRune(id, 0):
		return errors.New("-session holds a NUL")
	}
	return nil
}

// waitNotices takes the owner's pending notices, waiting up to timeout
// (forever when negative) for at least one. The exit of a process a task
// lives by ends a wait: the notices are looked at again with the watcher
// closed (short of descriptors a look beside it cannot settle the task),
// and a process seen gone is not watched again, its task looked at once a
// second instead, so that a task that cannot be settled now makes the
// wait poll rather than spin.
func (inv *invocation) waitNotices(key string, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	gone := map[int]bool{}
	for {
		w, skipped := inv.noticeWatcher(key, gone)
		notices := inv.takeNotices(key)
		left := time.Until(deadline)
		if timeout < 0 {
			left = time.Hour
		}
		if len(notices) > 0 || left <= 0 {
			w.close()
			return notices
		}
		if skipped {
			left = min(left, time.Second)
		}
		exited := w.wait(min(left, time.Hour))
		w.close()
		if len(exited) == 0 {
			continue
		}
		for _, pid := range exited {
			gone[pid] = true
		}
		if notices := inv.takeNotices(key); len(notices) > 0 {
			return notices
		}
	}
}

// noticeWatcher watches what settles the owner's unsettled tasks, and the
// arrival of new ones, but for the processes in gone: skipped says some
// were left out. It is made before the notices are looked at, so an
// event between the look and the wait still wakes the wait.
func (inv *invocation) noticeWatcher(key string, gone map[int]bool) (w *watcher, skipped bool) {
	pending := filepath.Join(inv.sessionDir(key), "pending")
	w = newWatcher(pending, 0, 0)
	for _, id := range inv.ownedIDs(key, "pending") {
		t, err := inv.loadTask(id)
		if err != nil || fileExists(filepath.Join(t.dir, "status.json")) {
			skipped = skipped || shortOfDescriptors(err)
			continue
		}
		w.watchDir(t.dir)
		var sup procRecord
		if readJSON(filepath.Join(t.dir, "supervisor.json"), &sup) != nil {
			sup = t.meta.Starter // its supervisor.json will wake the wait
		}
		if gone[sup.PID] {
			skipped = true
			continue
		}
		w.watchProcess(sup.PID, sup.Start)
	}
	return w, skipped
}
