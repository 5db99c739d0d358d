package main

// The budgets of the git protection (gitguard.go): what one call protects
// is bounded for each place it starts from, so that a command that fills
// a directory every session writes can neither refuse every other
// session's calls nor leave another session's workspace unprotected.

import "fmt"

// guardBudget is what the protection of one top may take: of a writable
// directory, or of another session's workspace, with the submodules each
// names.
type guardBudget struct {
	dir                string
	own                bool // the call's workspace
	tops, entries      int
	bytes              int
	steps              int // left for resolving submodule paths (resolveWithin)
	spent, warnedSpent bool
	reach              *guardBudget // the workspace's, for what it reaches outside itself (outside)
	pathBytes          int          // of the paths it passes the launcher (overPath)
	callBytes          *int         // the same, of every budget but the workspace's
}

// overPath counts path p, which the launcher gets on its command line,
// against the budget's bytes of paths and, but for the call's workspace
// (which is scanned first), the call's: however many places a command
// fills, with paths however long, the launcher's arguments stay far
// below the kernel's limit, which would fail every confined call.
func (b *guardBudget) overPath(p string) bool {
	b.pathBytes += len(p) + 1
	if !b.own && b.callBytes != nil {
		*b.callBytes += len(p) + 1
		if *b.callBytes > maxCallPathBytes {
			return true
		}
	}
	return b.pathBytes > maxGuardPathBytes
}

// outside is the budget for what the call's workspace reaches outside
// itself (its git dir in /tmp, as a worktree of a repository there; a
// submodule linked there): those lie in a directory every session's
// command can fill, so they are protected as far as a budget goes (what
// the workspace's own .git names first), and never refuse the call.
// Another top's budget is its own.
func (b *guardBudget) outside(p string) *guardBudget {
	if !b.own || within(p, b.dir) {
		return b
	}
	if b.reach == nil {
		b.reach = &guardBudget{dir: b.dir, bytes: maxGuardBytes, steps: maxResolveSteps, callBytes: b.callBytes}
	}
	return b.reach
}

// over counts one more against n, and reports whether the budget is spent.
func (b *guardBudget) over(n *int) bool {
	*n++
	return b.spent || *n > maxGuardEntries
}

// spend notes that the budget is spent. That refuses the call when it is
// the call's workspace's. Another top (/tmp, a writable root, another
// session's workspace), which any session's command can fill, is
// protected as far as its budget went and no further, with a word on
// stderr: filling one must not refuse every other session's calls, nor
// leave the rest unprotected.
func (b *guardBudget) spend() error {
	if b.own {
		return fmt.Errorf("too many protected git files under %q", b.dir)
	}
	b.spent = true
	b.warn()
	return nil
}

// warn says once on stderr that not all of the top's git files are protected.
func (b *guardBudget) warn() {
	if !b.warnedSpent {
		b.warnedSpent = true
		warnf("bashcall: the git files under %q are more than a call protects; only the first are protected", b.dir)
	}
}
