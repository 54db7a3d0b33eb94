package urlsecret

import (
	"net/url"
	"slices"
	"strings"
)

// seedLen is the length of an NKey seed as nsc and nk write it: S, the
// kind's letter and 56 base32 characters, 58 in all, in either case. It is a private key,
// whatever parameter holds it and wherever it stands in a URL (a re-test
// pass found one shown under nkeys=, as the user name, as the host). A seed
// broken by other characters (a wrapped paste) is not recognised.
// Its edges are any character but a letter or a digit 2-7: a '_' or a
// digit 0, 1, 8 or 9 beside it is no part of it (`\b` took them for
// letters, and a seed glued to one was shown), and one character may end
// a seed and begin the next (a pattern that took the edge took it from the
// next seed, which was shown: re-test passes). findSeeds reads it so.
const seedLen = 58

// seedChar reports whether c is of a seed's alphabet (base32, either case).
func seedChar(c byte) bool {
	if '2' <= c && c <= '7' {
		return true
	}
	c |= 0x20 // lower case
	return 'a' <= c && c <= 'z'
}

// findSeeds returns the seeds in t, at most maxSeeds: runs of exactly
// seedLen characters of the alphabet, the first an 's' and the second a
// letter.
func findSeeds(t string) []string {
	var out []string
	for i := 0; i+seedLen <= len(t) && len(out) < maxSeeds; {
		if !seedChar(t[i]) || i > 0 && seedChar(t[i-1]) {
			i++
			continue
		}
		j := i
		for j < len(t) && seedChar(t[j]) {
			j++
		}
		if r := t[i:j]; len(r) == seedLen && r[0]|0x20 == 's' && r[1] > '7' {
			out = append(out, r)
		}
		i = j
	}
	return out
}

// maxSeeds bounds the seeds of one URL that are looked for in a text, each
// by a pattern of its own: a URL of kilobytes of seed-shaped words would
// otherwise take seconds to redact (a re-test pass).
const maxSeeds = 16

// seeds returns the NKey seeds in u (user info, host, query and path), as
// written and unescaped, at most maxSeeds of them.
func seeds(u *url.URL) []string {
	var out []string
	texts := []string{u.Host, u.RawQuery, u.Path, u.RawPath, u.Fragment, u.Opaque}
	if u.User != nil {
		texts = append(texts, u.User.String(), u.User.Username())
	}
	for _, t := range texts {
		out = append(out, findSeeds(t)...)
		if v, err := url.PathUnescape(t); err == nil && v != t {
			out = append(out, findSeeds(v)...)
		}
	}
	for _, sd := range out { // a client may print it in the other case
		out = append(out, strings.ToUpper(sd), strings.ToLower(sd))
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return out[:min(len(out), 3*maxSeeds)]
}

// HasSeed reports whether rawURL holds an NKey seed itself, which belongs
// in a file named by nkey=.
func HasSeed(rawURL string) bool {
	if v, err := url.PathUnescape(rawURL); err == nil {
		rawURL = v
	}
	return len(findSeeds(rawURL)) > 0
}
