package main

// What is left of a command whose bashcall or supervisor vanished, and
// stopping only what provably belongs to it.
//
// A command's tree is recorded before the command can run anything: the
// inode numbers of its output pipes and a start-time floor (the recording
// process's own start), then, once it exists, the leader's pid and start.
// A task's leader gets SIGSTOP, not SIGKILL, when its supervisor dies:
// frozen, it keeps its pid, and so its session id, from being handed to
// another process until whoever cleans up has used it. A foreground
// call's leader dies with its bashcall instead: one frozen before its exec
// would hold bashcall's own descriptors, the host's pipes among them.
//
// A process provably belongs to the tree, and is stopped, when the boot is
// the recorded one and it is
//   - the recorded leader (pid and start time);
//   - a process started no earlier than the floor that holds one of the
//     recorded pipes, which only the tree's processes inherit;
//   - a member of the session of one of those, unless the session's leader
//     lives and is older than the floor: a session made by the tree holds
//     only the tree's processes, and its id cannot be reused while one of
//     them lives;
//   - a descendant of any of these.
// Everything else is left alone, however suspicious: a process of the
// leader's session id when the leader is gone and no member holds a pipe
// may belong to a later session that reused the id. Those are reported.

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// treeRecord identifies a command's process tree.
type treeRecord struct {
	procRecord          // the leader; PID is 0 until it exists
	Pipes      []uint64 `json:"pipes,omitempty"` // inode numbers of its output pipes
	Since      uint64   `json:"since,omitempty"` // no process of the tree started earlier
}

// newTreeRecord describes the tree that will run with pipes, started by
// this process.
func newTreeRecord(pipes []*os.File) *treeRecord {
	r := &treeRecord{procRecord: procRecord{BootID: bootID()}}
	r.Since, _ = procStartTime(os.Getpid())
	for _, f := range pipes {
		if fi, err := f.Stat(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				r.Pipes = append(r.Pipes, uint64(st.Ino))
			}
		}
	}
	return r
}

// owned returns the live processes that provably belong to the tree, with
// their start times, and the members of the leader's session that do not.
func (r *treeRecord) owned(procs map[int]procStat) (map[int]uint64, []int) {
	if r.BootID == "" || r.BootID != bootID() {
		return nil, nil
	}
	spare := ancestors(procs, os.Getpid())
	var seeds []int
	if s, ok := procs[r.PID]; r.PID > 0 && ok && s.start == r.Start && !s.zombie {
		seeds = append(seeds, r.PID)
	}
	for pid, s := range procs {
		if !s.zombie && s.start >= r.Since && !spare[pid] && holdsPipe(pid, r.Pipes) {
			seeds = append(seeds, pid)
		}
	}
	sessions := map[int]bool{}
	for _, pid := range seeds {
		// A session id of 0 is a session begun outside this pid namespace
		// (a container's processes often all read 0): never one of ours.
		sid := procs[pid].sid
		if sid <= 0 {
			continue
		}
		if leader, ok := procs[sid]; !ok || leader.start >= r.Since {
			sessions[sid] = true
		}
	}
	var roots []int
	for pid, s := range procs {
		if sessions[s.sid] {
			roots = append(roots, pid)
		}
	}
	owned := map[int]uint64{}
	for pid, start := range closure(procs, append(seeds, roots...)) {
		if !spare[pid] && pid != 1 {
			owned[pid] = start
		}
	}
	var doubt []int
	for pid, s := range procs {
		if _, ok := owned[pid]; r.PID > 0 && s.sid == r.PID && !s.zombie && !ok && !spare[pid] {
			doubt = append(doubt, pid)
		}
	}
	return owned, doubt
}

// ancestors is pid and every process above it: never to be stopped.
func ancestors(procs map[int]procStat, pid int) map[int]bool {
	up := map[int]bool{}
	for pid > 0 && !up[pid] {
		up[pid] = true
		pid = procs[pid].ppid
	}
	return up
}

// closure is roots and all their descendants, live ones only.
func closure(procs map[int]procStat, roots []int) map[int]uint64 {
	children := map[int][]int{}
	for pid, s := range procs {
		children[s.ppid] = append(children[s.ppid], pid)
	}
	out := map[int]uint64{}
	for len(roots) > 0 {
		pid := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if _, seen := out[pid]; seen || procs[pid].zombie {
			continue
		}
		if s, ok := procs[pid]; ok {
			out[pid] = s.start
			roots = append(roots, children[pid]...)
		}
	}
	return out
}

// anyLeft reports whether a process of the tree still runs.
func (r *treeRecord) anyLeft() bool {
	owned, _ := r.owned(scanProcs())
	return len(owned) > 0
}

// stop kills what is left of the tree: it freezes every process found
// (SIGSTOP), looks again until no new one appears (a frozen process cannot
// fork), then kills them all. It returns the members of the leader's
// session it left alone.
func (r *treeRecord) stop() []int {
	frozen := map[int]uint64{}
	var doubt []int
	for round := 0; round < 50; round++ {
		var owned map[int]uint64
		owned, doubt = r.owned(scanProcs())
		fresh := false
		for pid, start := range owned {
			if _, ok := frozen[pid]; !ok {
				signalProcess(pid, start, syscall.SIGSTOP)
				frozen[pid], fresh = start, true
			}
		}
		if !fresh {
			break
		}
	}
	for pid, start := range frozen {
		signalProcess(pid, start, syscall.SIGKILL)
	}
	return doubt
}

// leftNote words the processes stop left alone, for a status note.
func leftNote(pids []int) string {
	if len(pids) == 0 {
		return ""
	}
	slices.Sort(pids)
	var list []string
	for _, pid := range pids[:min(len(pids), 10)] {
		list = append(list, strconv.Itoa(pid))
	}
	return fmt.Sprintf("; left running %d process(es) of its session id that could not be proven to belong to it (pid %s)",
		len(pids), strings.Join(list, ", "))
}
