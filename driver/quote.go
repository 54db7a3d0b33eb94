package driver

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxNameShown is the longest name QuoteName shows whole, in bytes.
const MaxNameShown = 128

// QuoteName returns name quoted as %q would, for error messages and logs;
// a name over 128 bytes is cut to its first 64 bytes (at a character
// boundary) followed by its length and the start of its SHA-256, so a huge
// name does not make a huge message, and two long names stay told apart:
// "aaaa…"… (1048576 bytes, sha256 3b5d3c7d20).
func QuoteName(name string) string {
	if len(name) <= MaxNameShown {
		return strconv.Quote(name)
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	sum := sha256.Sum256([]byte(name))
	return fmt.Sprintf("%s… (%d bytes, sha256 %x)", strconv.Quote(name[:cut]), len(name), sum[:5])
}
