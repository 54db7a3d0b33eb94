package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// esc makes text from the store (names, labels, owner ids, leader values,
// notes, errors) safe to print on an operator's terminal: control
// characters (ESC, CR, BEL, newline, tab, C1 codes such as CSI) and invalid
// UTF-8 are shown escaped (\x1b, \n, \u009b), so a label cannot clear the
// screen, spoof rows, or set the clipboard (OSC 52). A backslash is
// doubled, so an escaped character and the same text typed in the name
// stay apart. JSON output is not passed through it: it stays exact.
func esc(s string) string {
	clean := true
	for i, r := range s {
		if r == '\\' || unicode.IsControl(r) || r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}
