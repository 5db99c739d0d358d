package main

// The read rules of a confined call's Landlock ruleset, added by a warm
// child (warm.go) while it waits for its call. They are most of a
// ruleset's rules (one per entry of every split directory, readrules.go),
// and adding them costs a few system calls each; listing the split
// directories again at the call, to see that nothing changed, cost as
// much. The call takes the ruleset made ahead only if it was planned
// from what the call's own plan would rest on: the same rights, the same
// read grant (the withheld paths, resolved by the call, and the
// files-only directories), each files-only directory the same inode, no
// change to the entries of any listed directory since it was listed, nor
// to its or its entries' attributes, and no mount or unmount in this mount
// namespace since (/proc/self/mounts reports one to poll). Otherwise the
// call builds its ruleset from nothing, as a call in a cold process does.
// planReadRules depends on nothing else but whether bashcall can list
// each split directory, which a change of its mode, owner or ACL changes:
// those are attribute events, and a ruleset is not made ahead at all
// where a split directory cannot be listed, but for one that is not there
// (the parent of a deny_read path not made yet), whose making its
// parent's watch sees.
//
// Changes to the listed directories are watched with inotify, which the
// kernel notifies from the very operation that creates, removes or
// renames an entry, or the directory itself, or changes their attributes.
// Each directory is watched through the descriptor it is listed from,
// before it is read: a change after the watch is an event, one before it
// is in the listing. The directories are listed parents first (a split
// directory's parent is split too), so that a directory swapped under its
// path before its own watch shows in its parent's, and one made
// unreadable between its open and its watch is not watched (adding a
// watch needs read permission) and gets no ruleset made ahead: that
// covers a mount's root, whose attribute change its parent does not see.
// Any event at all, or a full queue, counts as a change.
//
// A rule is bound to the inode it was opened at. Each rule made ahead is
// checked to be on the inode the listing named (an entry replaced between
// the listing and the rule gives up the ruleset), and rulesets are made
// ahead only where every listed directory is on a filesystem whose inode
// numbers are unique on their device (ext4, xfs, tmpfs; not overlayfs,
// whose layers can share numbers, nor btrfs, whose subvolumes all have
// the same root inode, nor network filesystems, whose changes made
// elsewhere inotify does not see). An entry on another device is a mount
// point, which the mount watch covers; a mount point of the same device (a
// bind mount from the same filesystem) shows another inode than the one
// listed, and no ruleset is made ahead. Regular files get no rule ahead,
// only at the call: a held reference would keep a deleted file's blocks
// in use for as long as the child waits.

import (
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// rulesAhead is the ruleset made ahead, until a call takes it.
var rulesAhead = struct {
	sync.Mutex
	// mounts is /proc/self/mounts, opened before the listing, or -1 when
	// none is made. It is not an os.File: the runtime's poller would take
	// the mount event that pollReady looks for. Nor is notify, the
	// inotify instance watching the listed directories.
	mounts, notify int
	// spent is an inotify instance no longer watched for, left open:
	// its release waits for the kernel's SRCU grace period (from a tenth
	// of a millisecond to fifteen, measured), which a call must not wait
	// for. It is closed spentLinger later, or by the process's exit if
	// that is sooner, or by the next ruleset made ahead: a call that runs
	// longer does not hold one of the user's inotify instances (128 by
	// default) for as long as it runs.
	spent int
	fd    int // the ruleset, while there is one
	plan  rulesetPlan
	grant readGrant
	// withheld is what no rule made ahead is on, nor may the rules
	// left to the call be: it stands while nothing it was read off
	// changes, as the ruleset does.
	withheld withheldSet
	files    []dirStamp // the files-only directories' stamps
	later    []int      // the read rules left to the call: regular files
	taken    int        // how many calls took one (for tests)
}{mounts: -1, notify: -1, spent: -1, fd: -1}

// planStamped plans the ruleset of s as buildRuleset does, with the
// stamps of what the plan depends on: the split directories it listed
// (watched by notify, if it is an inotify instance) and the files-only
// directories it names.
func planStamped(s *launchSpec, abi int, inos map[string]uint64, notify int) (rulesetPlan, []dirStamp) {
	var dirs []dirStamp
	plan := planRuleset(s.writable, s.reads, s.netOff, abi, stampedList(&dirs, inos, notify))
	return plan, append(dirs, filesOnlyStamps(s.reads)...)
}

// filesOnlyStamps are the stamps of g's files-only directories.
func filesOnlyStamps(g readGrant) []dirStamp {
	var dirs []dirStamp
	for _, f := range g.FilesOnly {
		stampDir(&dirs, f)
	}
	return dirs
}

// stableInodes reports whether a filesystem's inode numbers are unique on
// its device and not reused while an inode is referenced.
func stableInodes(fsType int64) bool {
	switch fsType {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.TMPFS_MAGIC:
		return true
	}
	return false
}

// prepareReadRules makes the ruleset of a call with reads g and netOff,
// with its read rules but those on regular files and no writable path,
// for the call to take. It changes nothing on disk.
func prepareReadRules(g readGrant, netOff bool) {
	abi, err := landlockABI()
	if err != nil || !g.confined() {
		return
	}
	closeSpentWatch()
	mounts, err := unix.Open("/proc/self/mounts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	notify, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		unix.Close(mounts)
		return
	}
	inos := map[string]uint64{}
	plan, dirs := planStamped(&launchSpec{reads: g, netOff: netOff}, abi, inos, notify)
	w := withheldOf(g)
	rfd, later, ok := makeAhead(plan, abi, dirs, inos, w)
	if !ok {
		unix.Close(mounts)
		unix.Close(notify)
		return
	}
	var files []dirStamp
	for _, d := range dirs {
		if d.filesOnly {
			files = append(files, d)
		}
	}
	ra := &rulesAhead
	ra.Lock()
	defer ra.Unlock()
	dropRulesAhead()
	ra.fd, ra.plan, ra.grant, ra.files, ra.later, ra.mounts, ra.notify = rfd, plan, g, files, later, mounts, notify
	ra.withheld = w
}

// makeAhead creates the ruleset of plan with its rules on anything but
// regular files, each checked to be on the inode its listing named, and
// none that w refuses, and returns the indexes of the rules left for
// later. ok is false where that cannot be made to hold.
func makeAhead(plan rulesetPlan, abi int, dirs []dirStamp, inos map[string]uint64, w withheldSet) (rfd int, later []int, ok bool) {
	byPath := map[string]dirStamp{}
	for _, d := range dirs {
		if d.absent {
			// Not there, or not a directory (the parent of a withheld
			// path not made yet): its parent, split too and listed
			// before it, is watched for its coming, or is absent too, or
			// no ruleset is made ahead.
			byPath[d.path] = d
			continue
		}
		if d.unlisted || !stableInodes(d.fsType) || !d.filesOnly && !d.watched {
			return -1, nil, false
		}
		byPath[d.path] = d
	}
	rfd, err := newRuleset(rulesetPlan{Handled: plan.Handled, HandledNet: plan.HandledNet, Scoped: plan.Scoped}, abi, withheldSet{})
	if err != nil {
		return -1, nil, false
	}
	for i, r := range plan.Rules {
		fd, st, err := openRulePath(r.Path)
		_, stamped := byPath[r.Path]
		if _, listed := inos[r.Path]; errors.Is(err, unix.ENOENT) && !listed && !stamped {
			continue // a files-only directory not there when stamped: a call skips it too
		}
		if err == nil {
			switch {
			case !listedAs(r.Path, &st, byPath, inos):
				err = unix.ESTALE // replaced since the listing
			case st.Mode&unix.S_IFMT == unix.S_IFREG:
				later = append(later, i)
			case w.refuses(r, &st):
				// withheld under another name: no rule, as at the call
			default:
				err = addRuleAt(rfd, fd, &st, r)
			}
			unix.Close(fd)
		}
		if err != nil {
			unix.Close(rfd)
			return -1, nil, false // gone since the listing, or unreadable
		}
	}
	return rfd, later, true
}

// listedAs reports whether st, of the rule path p, is what the listing
// saw: the files-only directory's inode (the only rule paths stamped
// themselves: a split directory gets no rule, but one that is not a
// directory, whose stamp is absent, is an entry), or an entry's inode on
// its directory's device (an entry on another device is a mount point;
// one on the same device, bound there, is refused).
func listedAs(p string, st *unix.Stat_t, byPath map[string]dirStamp, inos map[string]uint64) bool {
	if d, ok := byPath[p]; ok && d.filesOnly {
		return st.Dev == d.dev && st.Ino == d.ino
	}
	d, ok := byPath[filepath.Dir(p)]
	ino, listed := inos[p]
	return ok && listed && (st.Dev != d.dev || st.Ino == ino)
}

// takeRulesAhead returns the ruleset made ahead for s, with the rules
// still to add to it (the regular files' read rules, then the writable
// paths' rules) and what they must not be on, if it was made with the
// rights s is confined with, from the read grant of s, and nothing it was
// planned from has changed since. Either way there is none after.
func takeRulesAhead(s *launchSpec, abi int) (int, []landlockRule, withheldSet, bool) {
	ra := &rulesAhead
	ra.Lock()
	defer ra.Unlock()
	if ra.fd < 0 {
		return -1, nil, withheldSet{}, false
	}
	head := rulesetHead(s.netOff, abi)
	same := ra.plan.Handled == head.Handled && ra.plan.HandledNet == head.HandledNet && ra.plan.Scoped == head.Scoped &&
		sameGrant(ra.grant, s.reads) &&
		!pollReady(ra.notify, unix.POLLIN) && !pollReady(ra.mounts, unix.POLLPRI) &&
		slices.Equal(ra.files, filesOnlyStamps(s.reads))
	fd := -1
	var rules []landlockRule
	w := ra.withheld
	if same {
		fd = ra.fd
		rules = make([]landlockRule, 0, len(ra.later)+len(s.writable))
		for _, i := range ra.later {
			rules = append(rules, ra.plan.Rules[i])
		}
		rules = append(rules, writableRules(s.writable, head.Handled)...)
		ra.fd = -1
		ra.taken++
	}
	dropRulesAhead()
	return fd, rules, w, same
}

// rulesAheadLife is how long after its request comes a call may take the
// ruleset made ahead: one that has not reached its launch by then (it
// waits for an approval, or it launches nothing: bash_output waits up to
// ten minutes) lets go of it, its inodes and its inotify instance, and
// builds its own if it launches after all.
const rulesAheadLife = time.Second

// boundRulesAhead starts the clock of rulesAheadLife.
func boundRulesAhead() { time.AfterFunc(rulesAheadLife, releaseRulesAhead) }

// releaseRulesAhead lets go of a ruleset made ahead that the call does
// not take (an unconfined call, one through the Go launcher, one that
// launches nothing here), and of the inodes it holds.
func releaseRulesAhead() {
	rulesAhead.Lock()
	defer rulesAhead.Unlock()
	dropRulesAhead()
}

// dropRulesAhead closes what was made ahead, but for its inotify
// instance, which it leaves spent; rulesAhead is locked.
func dropRulesAhead() {
	ra := &rulesAhead
	for _, fd := range []int{ra.mounts, ra.fd} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	if ra.notify >= 0 {
		if ra.spent >= 0 {
			unix.Close(ra.spent)
		}
		ra.spent = ra.notify
		time.AfterFunc(spentLinger, closeSpentWatch)
	}
	ra.fd, ra.plan, ra.grant, ra.files, ra.later, ra.mounts, ra.notify = -1, rulesetPlan{}, readGrant{}, nil, nil, -1, -1
	ra.withheld = withheldSet{}
}

// spentLinger is how long a spent inotify instance stays open: longer
// than a short call takes, whose process's exit then closes it. Closing it
// blocks the thread that does it, and with it the process's only P
// (warmUp) until the runtime takes that back, up to 10 ms.
const spentLinger = 100 * time.Millisecond

// closeSpentWatch closes the spent inotify instance, away from any call.
func closeSpentWatch() {
	rulesAhead.Lock()
	defer rulesAhead.Unlock()
	if rulesAhead.spent >= 0 {
		unix.Close(rulesAhead.spent)
		rulesAhead.spent = -1
	}
}

// pollReady reports whether fd has events (POLLPRI on /proc/self/mounts:
// the mount table changed; POLLIN on an inotify instance: a watched
// directory changed), or cannot tell.
func pollReady(fd int, events int16) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: events}}
	n, err := unix.Poll(fds, 0)
	return err != nil || n != 0
}
