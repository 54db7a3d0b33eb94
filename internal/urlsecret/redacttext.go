package urlsecret

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// RedactText replaces the secrets of u (see Secrets) in text by "xxxxx",
// however they are percent-escaped, except where text holds a short one
// (under 16 characters) only as part of a longer word ("p" in "tcp", which
// would otherwise read "tcxxxxx" and tell the password). A longer secret
// is hidden wherever it stands: glued to a word, a hash was shown (a
// re-test pass), and hiding it there tells nothing. A secret that is
// itself a word of the text's prose is replaced all the same (a backend
// may quote a password in prose): with the password "refused",
// "connection refused" reads "connection xxxxx".
func RedactText(text string, u *url.URL) string {
	// Every secret's places are found in the text as it is, then hidden
	// at once: hiding one first could cut another that overlaps it, and
	// leave the rest of that one shown (a re-test pass).
	var spans [][2]int
	var dec decodedText // text with its escapes read, if it has any
	if strings.Contains(text, "%") {
		dec = unescapeLoose(text)
	}
	secrets := Secrets(u)
	for _, s := range secrets {
		spans = append(spans, places(text, dec, s, len(secrets) <= maxPatterns)...)
	}
	if len(spans) == 0 {
		return text
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var b strings.Builder
	done := 0 // text[:done] is in b, or hidden
	for _, sp := range spans {
		switch {
		case sp[1] <= done: // inside a span already hidden
		case sp[0] < done: // overlapping it: hide the rest too
			done = sp[1]
		default:
			b.WriteString(text[done:sp[0]])
			b.WriteString("xxxxx")
			done = sp[1]
		}
	}
	b.WriteString(text[done:])
	return b.String()
}

// places returns where text spells s (see spellings), other than a short
// s inside a longer word (see RedactText). dec is text with its
// percent-escapes read (unescapeLoose), empty if it has none; few says
// the URL has few secrets (at most maxPatterns).
//
// s is looked for with strings.Index, as written in text and in dec,
// whose places map back to text's: that finds every spelling of s with
// its characters as themselves or escaped, at no cost of a pattern
// (thousands of secret parameters, or one of 64 KiB, took seconds to
// minutes: re-test passes). The pattern of spellings is run besides where
// it can find more and costs little: for a secret of at most maxPattern
// bytes, when the URL has few secrets, and either the text has escapes (a
// raw '%' before hex digits reads as one in dec: "100%deadbeef" hid
// nothing, a re-test pass) or s has a '+' or a space (which may stand for
// each other) or bytes that are not UTF-8 (which a text may show as
// U+FFFD). A secret past those bounds is also looked for with its '+' and
// spaces swapped and its bad bytes as U+FFFD.
func places(text string, dec decodedText, s string, few bool) [][2]int {
	if s == "" {
		return nil
	}
	odd := strings.ContainsAny(s, "+ ") || !utf8.ValidString(s)
	forms := []string{s}
	if odd {
		forms = append(forms, strings.NewReplacer("+", " ", " ", "+").Replace(s), strings.ToValidUTF8(s, "\uFFFD"))
	}
	var found [][2]int
	for _, f := range forms {
		found = append(found, indexAll(text, f, nil)...)
		if dec.text != "" {
			found = append(found, indexAll(dec.text, f, dec.at)...)
		}
	}
	if few && len(s) <= maxPattern && (odd || dec.text != "") {
		re := spellings(s)
		for from := 0; from < len(text); {
			m := re.FindStringIndex(text[from:])
			if m == nil {
				break
			}
			found = append(found, [2]int{from + m[0], from + m[1]})
			// On from the match's end: resuming a character after its start
			// found overlapping copies, but a secret of one letter repeated
			// then made every position a match, each costing the secret's
			// length (minutes: a re-test pass). RedactText merges spans, and
			// indexAll finds overlapping copies as written and read.
			from += max(m[1], m[0]+1)
		}
	}
	short := utf8.RuneCountInString(s) < 16
	valid := utf8.ValidString(text)
	var out [][2]int
	for _, sp := range found {
		i, j := sp[0], sp[1]
		if short && (inWord(neighbour(text, i, true), s, true) || inWord(neighbour(text, j, false), s, false)) {
			continue
		}
		if valid && (!utf8.RuneStart(text[i]) || j < len(text) && !utf8.RuneStart(text[j])) {
			// A secret's bad byte met inside a character of a valid text:
			// hiding there would cut the character in half (a re-test pass).
			continue
		}
		out = append(out, sp)
	}
	return out
}

// neighbour returns the rune of text just before i (before) or at i, read
// through a percent-escape: "password%3Dhunter2" has '=' before the
// secret, not 'D' (a re-test pass). RuneError at either end.
func neighbour(text string, i int, before bool) rune {
	// An escaped byte past ASCII is part of a character whose other bytes
	// may be escaped too: it counts as no letter (read as Latin-1, %E2 was
	// â, and "hunter2%E2%80%94" kept its password: a re-test pass).
	escaped := func(hex string) rune {
		v, _ := strconv.ParseUint(hex, 16, 8)
		if v >= utf8.RuneSelf {
			return utf8.RuneError
		}
		return rune(v)
	}
	if before {
		if i >= 3 && text[i-3] == '%' && ishex(text[i-2]) && ishex(text[i-1]) {
			return escaped(text[i-2 : i])
		}
		r, _ := utf8.DecodeLastRuneInString(text[:i])
		return r
	}
	if i+2 < len(text) && text[i] == '%' && ishex(text[i+1]) && ishex(text[i+2]) {
		return escaped(text[i+1 : i+3])
	}
	r, _ := utf8.DecodeRuneInString(text[i:])
	return r
}

// Bounds of places' pattern of spellings (see places).
const (
	maxPatterns = 64
	maxPattern  = 1 << 10
)

// indexAll returns the places of s in t, overlapping ones too, mapped to
// another text's by at (t's byte i is at[i] there) if at is not nil.
func indexAll(t, s string, at []int) [][2]int {
	var out [][2]int
	for from := 0; ; {
		i := strings.Index(t[from:], s)
		if i < 0 {
			return out
		}
		i += from
		if at == nil {
			out = append(out, [2]int{i, i + len(s)})
		} else {
			out = append(out, [2]int{at[i], at[i+len(s)]})
		}
		_, n := utf8.DecodeRuneInString(t[i:])
		from = i + max(n, 1)
	}
}

// inWord reports whether r, the rune next to an occurrence of s (before it
// or after), makes that occurrence part of a longer word: both r and s's
// neighbouring end are letters or digits.
func inWord(r rune, s string, before bool) bool {
	var end rune
	if before {
		end, _ = utf8.DecodeRuneInString(s)
	} else {
		end, _ = utf8.DecodeLastRuneInString(s)
	}
	word := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	return word(r) && word(end)
}

// decodedText is a text with its percent-escapes read, and where each of
// its bytes came from in the text (at has one more entry, for its end).
type decodedText struct {
	text string
	at   []int
}

// unescapeLoose reads t's percent-escapes (%41 is A), leaving any that is
// not one as it is: the text an escaped secret reads as.
func unescapeLoose(t string) decodedText {
	var b strings.Builder
	at := make([]int, 0, len(t)+1)
	for i := 0; i < len(t); i++ {
		at = append(at, i)
		if c := t[i]; c == '%' && i+2 < len(t) && ishex(t[i+1]) && ishex(t[i+2]) {
			v, _ := strconv.ParseUint(t[i+1:i+3], 16, 8)
			b.WriteByte(byte(v))
			i += 2
		} else {
			b.WriteByte(c)
		}
	}
	return decodedText{b.String(), append(at, len(t))}
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
