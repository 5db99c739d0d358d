package main

// Landlock through raw system calls: one wrapper per system call, the
// ABI and errata probes, and building a launch's ruleset (bashcall builds
// it for the native launcher; the Go launcher builds its own).
//
// Kernel documentation: https://docs.kernel.org/userspace-api/landlock.html

import (
	"errors"
	"fmt"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rulesetAttr mirrors struct landlock_ruleset_attr up to ABI 7.
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// size is how much of the struct the kernel of this ABI knows: older
// kernels reject a larger struct whose extra fields are not zero.
func (a *rulesetAttr) size(abi int) uintptr {
	switch {
	case abi >= 6:
		return 24
	case abi >= 4:
		return 16
	}
	return 8
}

// pathBeneathAttr mirrors struct landlock_path_beneath_attr, which the
// kernel declares packed.
type pathBeneathAttr struct {
	allowedAccess uint64
	parentFD      int32
}

// landlockCreateRuleset wraps landlock_create_ruleset(2).
func landlockCreateRuleset(attr *rulesetAttr, size uintptr, flags uint) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(attr)), size, uintptr(flags))
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// landlockAddRule wraps landlock_add_rule(2) for LANDLOCK_RULE_PATH_BENEATH.
func landlockAddRule(rulesetFD int, attr *pathBeneathAttr) error {
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(attr)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// landlockRestrictSelf wraps landlock_restrict_self(2).
func landlockRestrictSelf(rulesetFD int, flags uint) error {
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rulesetFD), uintptr(flags), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// landlockABI probes the kernel's Landlock ABI version. With
// BASHCALL_DISABLE_LANDLOCK=1 in bashcall's environment it reports none,
// so that a host can see its fail-closed path on any kernel.
func landlockABI() (int, error) {
	v, err := landlockCreateRuleset(nil, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
			return 0, errNoLandlock
		}
		return 0, fmt.Errorf("probing landlock: %w", err)
	}
	return v, nil
}

// landlockErrataFixed is the kernel's mask of fixed Landlock errata; a
// kernel that predates the query (EINVAL) has fixed none that it knows.
func landlockErrataFixed() uint64 {
	mask, err := landlockCreateRuleset(nil, 0, unix.LANDLOCK_CREATE_RULESET_ERRATA)
	if err != nil {
		return 0
	}
	return uint64(mask)
}

// buildRuleset creates the launch's Landlock ruleset and returns its
// descriptor. It needs no particular thread or process: the native
// launcher gets the ruleset bashcall built. A warm child's call starts
// from the read rules made ahead when nothing they were planned from has
// changed since (rulesahead_linux.go).
func buildRuleset(s *launchSpec) (int, error) {
	abi, err := landlockABI()
	if err != nil {
		return -1, err
	}
	if rfd, rules, w, ok := takeRulesAhead(s, abi); ok {
		return addRules(rfd, rules, w)
	}
	return newRuleset(planRuleset(s.writable, s.reads, s.netOff, abi, osListDir), abi, withheldOf(s.reads))
}

// newRuleset creates the ruleset of plan, none of its entries' rules on
// what w withholds.
func newRuleset(plan rulesetPlan, abi int, w withheldSet) (int, error) {
	attr := rulesetAttr{handledAccessFS: uint64(plan.Handled), handledAccessNet: plan.HandledNet, scoped: plan.Scoped}
	rfd, err := landlockCreateRuleset(&attr, attr.size(abi), 0)
	if err != nil {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	return addRules(rfd, plan.Rules, w)
}

// fileID is an inode: its device and number.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), st.Ino} }

// withheldSet is what no rule on an entry of a split directory may be on,
// as the filesystem is when a ruleset is made: Landlock binds a rule to
// an inode, and a withheld inode can have another name there (a hard
// link of a withheld file, a bind mount of a withheld or split directory,
// the other spelling of a name in a case-insensitive directory).
type withheldSet struct {
	ids map[fileID]bool // every withheld path's inode, nested ones too, and every split directory's
	// aliased are the split directories that are a withheld directory
	// by another name, or lie beneath one: none of their entries is
	// granted.
	aliased map[string]bool
}

// withheldOf is g's withheldSet, read off the filesystem now.
func withheldOf(g readGrant) withheldSet {
	w := withheldSet{ids: map[fileID]bool{}, aliased: map[string]bool{}}
	if !g.confined() {
		return w
	}
	var st unix.Stat_t
	for _, d := range g.Denied {
		if unix.Lstat(d, &st) == nil {
			w.ids[idOf(&st)] = true
		}
	}
	_, split := splitPlan(g)
	for _, s := range sortedKeys(split) {
		if w.aliased[filepath.Dir(s)] && s != "/" {
			w.aliased[s] = true
		}
		if unix.Lstat(s, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue // not there, or holding nothing (planReadRules)
		}
		if w.ids[idOf(&st)] {
			w.aliased[s] = true
		}
		w.ids[idOf(&st)] = true
	}
	return w
}

// refuses reports whether the rule r, its path opened at st, would grant
// what w withholds: an entry that is a withheld inode, or lies in an
// aliased directory, or is a regular file of more than one link (which
// may be a withheld file's, or one's in a withheld directory: granting
// it would grant that inode at its withheld path too), or a split path
// that was no directory and now is one.
func (w withheldSet) refuses(r landlockRule, st *unix.Stat_t) bool {
	if !r.Entry {
		return false
	}
	typ := st.Mode & unix.S_IFMT
	return w.ids[idOf(st)] || w.aliased[filepath.Dir(r.Path)] ||
		typ == unix.S_IFREG && st.Nlink > 1 || r.NotDir && typ == unix.S_IFDIR
}

// addRules adds rules to the ruleset rfd, which it closes if one fails.
// A rule that w refuses grants nothing and is skipped.
func addRules(rfd int, rules []landlockRule, w withheldSet) (int, error) {
	for _, r := range rules {
		if err := addPathRule(rfd, r, w); err != nil {
			unix.Close(rfd)
			return -1, err
		}
	}
	return rfd, nil
}

// addPathRule adds one rule. A writable path that does not exist grants
// nothing and is skipped; "/" must exist. The paths arrive canonical, so
// they are opened without following any symlink: one swapped in since
// bashcall checked the path (by a command of another call, in /tmp say)
// fails the launcher instead of widening the sandbox. An entry of a split
// directory that w refuses is skipped: a rule on it would grant what is
// withheld.
func addPathRule(rfd int, r landlockRule, w withheldSet) error {
	fd, st, err := openRulePath(r.Path)
	if errors.Is(err, unix.ENOENT) && r.Path != "/" {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if w.refuses(r, &st) {
		return nil
	}
	return addRuleAt(rfd, fd, &st, r)
}

// openRulePath opens a rule's path, without following any symlink, as an
// O_PATH descriptor, and stats it.
func openRulePath(p string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return -1, st, fmt.Errorf("opening rule path %q: %w", p, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, fmt.Errorf("stat of rule path %q: %w", p, err)
	}
	return fd, st, nil
}

// addRuleAt adds r to the ruleset rfd on fd, r's path opened.
func addRuleAt(rfd, fd int, st *unix.Stat_t, r landlockRule) error {
	attr := pathBeneathAttr{allowedAccess: uint64(ruleAccess(r.Access, st.Mode&unix.S_IFMT == unix.S_IFDIR)), parentFD: int32(fd)}
	if err := landlockAddRule(rfd, &attr); err != nil {
		return fmt.Errorf("landlock_add_rule %q: %w", r.Path, err)
	}
	return nil
}
