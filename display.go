package main

// What a person reads of what a model wrote: the approval prompt's
// justification and command, and bash_list's one line per task. The model
// chooses every rune of them, so none may show as something other than
// what it is: control and format characters, invisible fillers, marks
// with nothing to combine with (or piled up to draw over other lines) and
// long runs of blanks are escaped or counted, while ordinary text of any
// script, emoji included, shows as written.

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxMarks is how many combining marks in a row may show on one base
// character (scripts with vowel signs and points use up to three).
const maxMarks = 3

// maxBlanks is the longest run of blanks a prompt shows as it is.
const maxBlanks = 8

// hiddenRune reports a rune that never shows as itself: a control
// character, a Unicode format character, a line or paragraph separator,
// or a blank that is not one (the Hangul fillers, the braille blank).
func hiddenRune(r rune) bool {
	switch r {
	case '\u2028', '\u2029', '\u115f', '\u1160', '\u3164', '\uffa0', '\u2800':
		return true
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// shows reports whether r shows as itself after prev, marks being the
// combining marks right before it: an emoji's presentation selector
// after a symbol, a combining mark on a letter (at most maxMarks of
// them), and anything not hidden but marks and selectors elsewhere.
func shows(prev, r rune, marks int) bool {
	switch {
	case hiddenRune(r):
		return false
	case unicode.Is(unicode.Variation_Selector, r):
		return (r == '\ufe0e' || r == '\ufe0f') && prev >= 0x2000 && !hiddenRune(prev)
	case unicode.Is(unicode.Me, r):
		return false
	case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r):
		return marks < maxMarks && (unicode.IsLetter(prev) || marks > 0)
	}
	return true
}

// isMark reports a combining mark.
func isMark(r rune) bool { return unicode.Is(unicode.M, r) }

// isSentence reports whether a justification is one line of text a
// person can read as it is: not blank, every rune showing as itself (no
// line break, escape sequence, bidirectional override or pile of marks,
// with which it could draw a fake "Command:" line in the approval prompt
// or hide the real one).
func isSentence(s string) bool {
	if strings.TrimSpace(s) == "" {
		return false
	}
	var prev rune
	marks := 0
	for _, r := range s {
		if !shows(prev, r, marks) {
			return false
		}
		marks, prev = nextMarks(marks, r), r
	}
	return true
}

// nextMarks is the count of combining marks in a row once r is read.
func nextMarks(marks int, r rune) int {
	if isMark(r) {
		return marks + 1
	}
	return 0
}

// isBlank reports a blank a prompt counts in a run: a space of any kind
// or a tab.
func isBlank(r rune) bool { return r == '\t' || unicode.Is(unicode.Zs, r) }

// displayCommand is a command as an approval prompt shows it: line breaks
// and tabs as they are, every rune that does not show as itself escaped
// (\x1b, \x0d, \u202e, \U000e0041), and a run of more than maxBlanks
// blanks counted ("[120 blanks]"), so that what the person reads is what
// runs.
func displayCommand(cmd string) string {
	var b strings.Builder
	var prev rune
	marks := 0
	for i := 0; i < len(cmd); {
		if n, size := blankRun(cmd[i:]); n > maxBlanks {
			fmt.Fprintf(&b, "[%d blanks]", n)
			i += size
			prev, marks = ' ', 0
			continue
		}
		r, size := utf8.DecodeRuneInString(cmd[i:])
		i += size
		if r == '\n' || r == '\t' || shows(prev, r, marks) {
			b.WriteRune(r)
		} else {
			writeEscaped(&b, r)
		}
		marks, prev = nextMarks(marks, r), r
	}
	return b.String()
}

// blankRun is the number of blanks s starts with, and their size in bytes.
func blankRun(s string) (n, size int) {
	for size < len(s) {
		r, w := utf8.DecodeRuneInString(s[size:])
		if !isBlank(r) {
			break
		}
		n, size = n+1, size+w
	}
	return n, size
}

// oneLine is a command on one line, as bash_list shows each task on one:
// its line breaks written \n and \r, and every other rune that does not
// show as itself escaped as in an approval prompt (\x0b, \x1b, \u2028),
// so that a command cannot draw a line of a task that does not exist,
// whatever a host takes for a line break.
func oneLine(cmd string) string {
	var b strings.Builder
	var prev rune
	marks := 0
	for _, r := range cmd {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t' || shows(prev, r, marks):
			b.WriteRune(r)
		default:
			writeEscaped(&b, r)
		}
		marks, prev = nextMarks(marks, r), r
	}
	return b.String()
}

// writeEscaped writes r as an escape: \xNN, \uNNNN or \UNNNNNNNN.
func writeEscaped(b *strings.Builder, r rune) {
	switch {
	case r < 0x100:
		fmt.Fprintf(b, "\\x%02x", r)
	case r < 0x10000:
		fmt.Fprintf(b, "\\u%04x", r)
	default:
		fmt.Fprintf(b, "\\U%08x", r)
	}
}
