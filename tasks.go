package main

// Background tasks in the state dir (PROTOCOL.md section 6): allocating
// ids, owners, notices and listing. statedir.go lays out a task's files;
// supervisor.go starts and supervises a task; taskend.go ends it.
//
// Status is the truth: a task with no status.json whose supervisor is gone
// (SIGKILL, OOM, reboot) is settled as killed by whoever looks next, after
// stopping what provably is left of its command; its note names what it
// had to leave alone.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Task states.
const (
	stateRunning   = "running"
	stateCompleted = "completed"
	stateKilled    = "killed"
)

// taskMeta is task.json, written once by the invocation that starts a task.
type taskMeta struct {
	ID             string `json:"id"`
	Owner          string `json:"owner"` // ownerKey of the session, "" for none
	Command        string `json:"command"`
	Workdir        string `json:"workdir"`
	Mode           string `json:"mode"`
	StartedAt      int64  `json:"startedAt"` // Unix milliseconds
	GraceMs        int64  `json:"graceMs"`
	MaxOutputBytes int64  `json:"maxOutputBytes"`
	MaxSpillBytes  int64  `json:"maxSpillBytes"`
	// MaxSpillTotalBytes is the state dir's cap on complete copies.
	MaxSpillTotalBytes int64 `json:"maxSpillTotalBytes,omitempty"`
	// Starter is the invocation that starts the task: until the supervisor
	// records itself, the task is starting while the starter lives.
	Starter procRecord `json:"starter"`
	// Reaper, when set, is the process whose end stops the task: the
	// bashcall mcp server whose own session started it (no one else can
	// reach that session once the server is gone).
	Reaper *procRecord `json:"reaper,omitempty"`
}

// procRecord identifies a process beyond its pid.
type procRecord struct {
	PID    int    `json:"pid"`
	Start  uint64 `json:"start"`
	BootID string `json:"bootId"`
	// Locked: a supervisor that holds a lock on its supervisor.json for
	// as long as it lives (supervisorLive).
	Locked bool `json:"locked,omitempty"`
}

// alive reports whether the recorded process still runs.
func (p *procRecord) alive() bool {
	return p != nil && p.PID > 0 && p.BootID == bootID() && processAlive(p.PID, p.Start)
}

// task is a handle on one task directory.
type task struct {
	id   string
	dir  string
	meta taskMeta
	held *os.File // its directory, locked while a tool works on it (taskhold.go)
}

func (inv *invocation) tasksDir() string { return filepath.Join(inv.stateDir, "tasks") }

// validTaskID accepts exactly "bash-<N>", so that an id never walks the
// filesystem.
func validTaskID(id string) bool {
	n, ok := strings.CutPrefix(id, "bash-")
	return ok && n != "" && len(n) < 19 && strings.Trim(n, "0123456789") == "" && (n == "0" || n[0] != '0')
}

func taskNumber(id string) int64 {
	n, _ := strconv.ParseInt(strings.TrimPrefix(id, "bash-"), 10, 64)
	return n
}

// openTask loads and holds (taskhold.go) a task the caller may touch, for
// the task tool named tool, or answers the contract's error.
func (inv *invocation) openTask(id, caller, tool string) (*task, error) {
	t, err := inv.loadTask(id)
	if shortOfDescriptors(err) {
		return nil, errCannotLook(tool, id, err)
	}
	if err != nil {
		return nil, errUnknownTask(id)
	}
	if t.meta.Owner != "" && t.meta.Owner != caller {
		return nil, errOtherSession(id)
	}
	if err := spareDescriptors(toolDescriptors); err != nil {
		return nil, errCannotLook(tool, id, err)
	}
	switch err := t.hold(); {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errUnknownTask(id) // collected since it was loaded
	case err != nil:
		return nil, errCannotLook(tool, id, err)
	}
	return t, nil
}

// loadTask reads a task's task.json.
func (inv *invocation) loadTask(id string) (*task, error) {
	if !validTaskID(id) {
		return nil, os.ErrNotExist
	}
	t := &task{id: id, dir: filepath.Join(inv.tasksDir(), id)}
	read := func() error {
		// A task's directory, never a symlink in its place (which another
		// process of the user could put there): its lock and records
		// would be made and written wherever it leads.
		if fi, err := os.Lstat(t.dir); err != nil {
			return err
		} else if !fi.IsDir() {
			return fmt.Errorf("the task directory %q is not a directory", t.dir)
		}
		return readJSON(filepath.Join(t.dir, "task.json"), &t.meta)
	}
	err := read()
	if errors.Is(err, fs.ErrPermission) {
		// A command changed the modes of bashcall's files: repair, retry.
		repairTree(inv.tasksDir())
		err = read()
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// readJSON decodes a small private file (openOwn: never through a link,
// never waiting on a FIFO, a regular file only).
func readJSON(p string, v any) error {
	f, err := openOwn(p, os.O_RDONLY)
	if err != nil {
		return err
	}
	defer f.Close()
	return json.NewDecoder(io.LimitReader(f, maxRecordBytes)).Decode(v)
}

// maxRecordBytes bounds what a record of the state dir is read of: the
// largest bashcall writes holds a request's command (maxRequestBytes).
const maxRecordBytes = 4 * maxRequestBytes

func writeJSON(p string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileAtomic(p, b)
}

// lockWait bounds the wait for a task's or the state dir's lock. Each is
// held for a read, a settle or an allocation, milliseconds; one held
// longer is held by a process that is stopped or stuck.
const lockWait = 10 * time.Second

// lockFile takes an exclusive flock, creating the file if need be (and
// putting its mode back: openOwn), waiting at most lockWait.
func lockFile(p string) (func(), error) {
	f, err := openOwn(p, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	if err = flockRetry(f, syscall.LOCK_EX, lockWait); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// ownedIDs lists the task ids recorded for an owner key, oldest first.
func (inv *invocation) ownedIDs(key, sub string) []string {
	p := filepath.Join(inv.sessionDir(key), sub)
	d, err := os.Open(p)
	if errors.Is(err, fs.ErrPermission) {
		repairTree(filepath.Dir(inv.sessionDir(key))) // as loadTask does
		d, err = os.Open(p)
	}
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	ids := names[:0]
	for _, n := range names {
		if validTaskID(n) {
			ids = append(ids, n)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return taskNumber(ids[i]) < taskNumber(ids[j]) })
	return ids
}

// runningCount counts an owner's tasks that still run. Only the tasks
// marked running are looked at, so the cost does not grow with history.
func (inv *invocation) runningCount(key string) int {
	n := 0
	for _, id := range inv.ownedIDs(key, "running") {
		if t, err := inv.loadTask(id); err == nil && t.final() == nil {
			n++
		} else {
			os.Remove(filepath.Join(inv.sessionDir(key), "running", id))
		}
	}
	return n
}

// checkTaskLimit refuses a start past max_tasks_per_session.
func (inv *invocation) checkTaskLimit(key string) error {
	if limit := inv.cfg.Background.MaxTasksPerSession; int64(inv.runningCount(key)) >= limit {
		return errTaskLimit(limit)
	}
	return nil
}

// allocateTask takes the next id under the state lock, checks the limit
// again (two starts may race) and creates the task's directory. The
// counter is saved before the directory exists, so a crash skips an id
// rather than reusing one.
func (inv *invocation) allocateTask(meta *taskMeta) (*task, error) {
	if _, err := privateDir(inv.tasksDir()); err != nil {
		return nil, err
	}
	if _, err := inv.ensureSessionDir(meta.Owner); err != nil {
		return nil, err
	}
	unlock, err := lockFile(filepath.Join(inv.stateDir, "lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := inv.checkTaskLimit(meta.Owner); err != nil {
		return nil, err
	}
	counter := filepath.Join(inv.stateDir, "next-id")
	var b []byte
	if f, err := openOwn(counter, os.O_RDONLY); err == nil {
		b, _ = io.ReadAll(io.LimitReader(f, 32))
		f.Close()
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	for n = max(n, 1); ; n++ {
		id := "bash-" + strconv.FormatInt(n, 10)
		if err := writeFileAtomic(counter, []byte(strconv.FormatInt(n+1, 10)+"\n")); err != nil {
			return nil, err
		}
		dir := filepath.Join(inv.tasksDir(), id)
		if err := os.Mkdir(dir, 0o700); errors.Is(err, os.ErrExist) {
			continue
		} else if err != nil {
			return nil, err
		}
		meta.ID = id
		t := &task{id: id, dir: dir, meta: *meta}
		err := writeJSON(filepath.Join(dir, "task.json"), meta)
		if err == nil {
			err = inv.recordOwnership(t)
		}
		if err != nil {
			// Nothing started: the task is not left half filed (a full
			// disk), listed as running and counted against the limit.
			for _, sub := range []string{"tasks", "running", "pending"} {
				os.Remove(filepath.Join(inv.sessionDir(t.meta.Owner), sub, id))
			}
			os.RemoveAll(dir)
			return nil, err
		}
		return t, nil
	}
}

// recordOwnership files the task under its owner, with a pending notice
// when it has one to receive it.
func (inv *invocation) recordOwnership(t *task) error {
	dirs := []string{"tasks", "running"}
	if t.meta.Owner != "" {
		dirs = append(dirs, "pending")
	}
	for _, sub := range dirs {
		if err := inv.fileUnder(t, sub); err != nil {
			return err
		}
	}
	return nil
}

// fileUnder makes the entry of t in its owner's list sub.
func (inv *invocation) fileUnder(t *task, sub string) error {
	return touch(filepath.Join(inv.sessionDir(t.meta.Owner), sub, t.id))
}

// touch makes an empty private file at p, or leaves the one there.
func touch(p string) error {
	f, err := openOwn(p, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return err
	}
	return f.Close()
}

// consumeNotice removes a pending notice; true for the one caller that
// removed it, however many race.
func (inv *invocation) consumeNotice(t *task) bool {
	return t.meta.Owner != "" && os.Remove(filepath.Join(inv.sessionDir(t.meta.Owner), "pending", t.id)) == nil
}

// holdNotice takes a pending notice into the task's directory, where
// giveNoticeBack finds it; true for the one caller that took it.
func (inv *invocation) holdNotice(t *task) bool {
	return t.meta.Owner != "" && os.Rename(filepath.Join(inv.sessionDir(t.meta.Owner), "pending", t.id), filepath.Join(t.dir, "notice.held")) == nil
}

// giveNoticeBack makes a held notice pending again. Renamed, it is given
// back once, whoever of a kill and the supervisor tries first.
func (t *task) giveNoticeBack() {
	if t.meta.Owner != "" {
		os.Rename(filepath.Join(t.dir, "notice.held"), filepath.Join(sessionDir(t.stateDir(), t.meta.Owner), "pending", t.id))
	}
}

// takeNotices delivers, once, the notices of the owner's settled tasks.
func (inv *invocation) takeNotices(key string) []string {
	var notices []string
	for _, id := range inv.ownedIDs(key, "pending") {
		t, err := inv.loadTask(id)
		if err != nil {
			os.Remove(filepath.Join(inv.sessionDir(key), "pending", id))
			continue
		}
		if f := t.final(); f != nil && inv.consumeNotice(t) {
			notices = append(notices, textNotice(id, f.taskStatus))
		}
	}
	return notices
}

// listTasks returns what bash_list shows the caller: its own tasks and
// ownerless ones, oldest first.
func (inv *invocation) listTasks(caller string) []listEntry {
	ids := inv.ownedIDs("", "tasks")
	if caller != "" {
		ids = append(ids, inv.ownedIDs(caller, "tasks")...)
		sort.Slice(ids, func(i, j int) bool { return taskNumber(ids[i]) < taskNumber(ids[j]) })
	}
	var entries []listEntry
	for _, id := range ids {
		t, err := inv.loadTask(id)
		if err != nil || (t.meta.Owner != "" && t.meta.Owner != caller) {
			continue
		}
		e := listEntry{ID: id, Command: t.meta.Command, Status: taskStatus{State: stateRunning}}
		if f := t.final(); f != nil {
			e.Status = f.taskStatus
		} else if !fileExists(t.dir) {
			// gc removes only a settled task: one whose status could not
			// be read because gc moved it aside meanwhile is not running,
			// it is gone.
			continue
		}
		entries = append(entries, e)
	}
	return entries
}
