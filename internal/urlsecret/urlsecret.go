// Package urlsecret knows which parts of a backend URL are secrets (its
// password, TLS key files and passwords, other passwords and tokens) and
// hides them from errors and logs. Package driver exports what backends and
// package dlock need of it (Redacted, RedactText, PasswordFileParam); the
// rest (Secrets, HasSecret) serves dlock's own packages and command.
package urlsecret

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PasswordFileParam is the URL parameter that names a file holding the
// password (see driver.PasswordFileParam).
const PasswordFileParam = "password_file"

// secretParams are query parameters whose values are secrets, or say where
// one is kept: TLS client keys (key, sslkey), files holding a password,
// NATS's nkey seed and credentials files (nkey, creds: a seed pasted in
// their place was shown whole, a re-test pass). Parameters whose names
// contain one of secretWords (such as sentinel_password, sslpassword,
// nkey_seed) are secret too.
var secretParams = []string{"key", "sslkey", PasswordFileParam, "nkey", "creds"}

// pathParams name a file that keeps the secret: on a command line, their
// values tell nothing but where the secret is (see HasSecret). The names
// ending in "file" (password_file, token_file, passfile) are such too.
var pathParams = []string{"key", "sslkey", "nkey", "creds"}

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

// tokenSchemes are the schemes whose URLs carry a token as their user name
// when no password follows it (nats://TOKEN@host, as NATS clients read it).
var tokenSchemes = []string{"nats", "tls"}

// userToken returns the token u carries as its user name, if any.
func userToken(u *url.URL) (string, bool) {
	if u.User == nil {
		return "", false
	}
	if _, ok := u.User.Password(); ok {
		return "", false
	}
	for _, s := range tokenSchemes {
		if strings.EqualFold(u.Scheme, s) && u.User.Username() != "" {
			return u.User.Username(), true
		}
	}
	return "", false
}

// listedUser returns the first host's user info of a host list whose first
// host's holds no password ("nats://TOKEN1@h1,TOKEN2@h2"): url.Parse reads
// "TOKEN1@h1" as the user name, which Redacted shows (a re-test pass).
func listedUser(u *url.URL) string {
	if u.User == nil {
		return ""
	}
	first, _, ok := strings.Cut(u.User.Username(), "@")
	if !ok || first == "" {
		return ""
	}
	return first
}

// secretParam reports whether the URL parameter name holds a secret.
func secretParam(name string) bool {
	// private-key, private.key and privateKey are private_key (re-test
	// passes); allowNativePasswords is listed as written, in lower case.
	if slices.Contains(plainParams, strings.ToLower(name)) {
		return false
	}
	n := strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToLower(camelWords.ReplaceAllString(name, "${1}_${2}")))
	if slices.Contains(plainParams, n) {
		return false
	}
	for _, p := range secretParams {
		if n == p {
			return true
		}
	}
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	// A word of its own in the name: private_key, tls_key, sentinel_pw
	// (a re-test pass); not inside a word, where "key" and "pw" are
	// common letters.
	words := strings.Split(n, "_")
	for _, w := range words {
		if slices.Contains(secretTokens, w) {
			return true
		}
	}
	// A key named for what it keys: signing_key, encryption_key_hex,
	// client_key2 (not sql_require_primary_key=ON, nor foreign_key_checks).
	for i := 1; i < len(words); i++ {
		if strings.HasPrefix(words[i], "key") && slices.Contains(keyKinds, words[i-1]) {
			return true
		}
	}
	return false
}

// camelWords finds where a camelCase name starts a word (accessKey).
var camelWords = regexp.MustCompile(`([a-z0-9])([A-Z])`)

// keyKinds are the words before a final "key" that make it a secret key.
var keyKinds = []string{"private", "api", "access", "signing", "encryption", "master", "secret", "client", "tls", "ssl", "shared", "auth", "session", "hmac", "sign", "encrypt"}

// secretTokens name a secret where they stand as a word of a parameter's
// name, between '_', '-' or '.'.
// ("key" alone was one, and hid MySQL's foreign_key_checks=0 and
// sql_require_primary_key=ON: a re-test pass.)
var secretTokens = []string{"pw", "keyfile", "privkey"}

// secretWords name a secret wherever they stand in a parameter's name:
// "seed" for an NKey seed (nkey_seed=SU…), a private key; "pass", "pwd",
// "auth", "apikey", "api_key", "access_key" and "credential" for what no
// backend reads but a user may write, and a backend's "unexpected option"
// error quoted with its value (a re-test pass).
var secretWords = []string{"password", "secret", "token", "seed", "pass", "pwd", "auth", "apikey", "api_key", "access_key", "credential", "private_key", "privatekey", "accesskey", "signingkey", "encryptionkey", "masterkey"}

// plainParams are parameters the backends' client libraries read whose
// names hold a secret word but whose values are not secret: methods and
// switches (pgx's require_auth=scram-sha-256 drew a false warning and lost
// its value from pgx's own error, a re-test pass), in lower case.
var plainParams = []string{"require_auth", "allowcleartextpasswords", "allownativepasswords", "allowoldpasswords",
	// PostgreSQL settings
	"password_encryption", "authentication_timeout", "geqo_seed", "md5_password_warnings",
	// MySQL system variables
	"generated_random_password_length", "default_authentication_plugin", "authentication_policy",
	"old_passwords", "password_history", "password_reuse_interval", "password_require_current",
	"default_password_lifetime", "disconnect_on_expired_password", "rand_seed1", "rand_seed2",
	"sha256_password_auto_generate_rsa_keys", "caching_sha2_password_auto_generate_rsa_keys",
	"sha256_password_proxy_users", "check_proxy_users", "mysql_native_password_proxy_users",
	// PostgreSQL: a role name, an extension's setting; libpq's OAuth settings
	"session_authorization", "passwordcheck_min_password_length", "oauth_issuer", "oauth_client_id", "oauth_scope"}

// aclParam is ZooKeeper's acl parameter: its digest entries
// (digest:user:HASH:perms) carry another identity's password hash, which
// an offline search can turn back into a weak password.
const aclParam = "acl"

// aclPairs calls fn with each acl pair of rawQuery, its value unescaped as
// zklock reads it (a '+' is a '+', not a space; ok false if it cannot be),
// and puts back in the query what fn returns.
func aclPairs(rawQuery string, fn func(raw, value string, ok bool) string) string {
	pairs := strings.Split(rawQuery, "&")
	for i, kv := range pairs {
		k, v, _ := strings.Cut(kv, "=")
		if key, err := url.QueryUnescape(k); err != nil || !strings.EqualFold(key, aclParam) {
			continue // url.Values unescapes a key: ac%6C is acl (a re-test pass)
		}
		val, err := url.PathUnescape(v)
		pairs[i] = k + "=" + fn(v, val, err == nil)
	}
	return strings.Join(pairs, "&")
}

// digestHashes returns what stands in the hash's place of each digest
// entry (digest:user:HASH) in an acl value, wherever the entry starts (a
// ';' or a space before it is a mistake, and the hash is secret all the
// same), if it is 16 characters or more: a hash, a near miss (cut short,
// quoted, base64url) or a password typed in its place. Shorter text there
// (a forgotten hash, "digest:ops:rd") is shown, being the mistake to see.
func digestHashes(v string) []string {
	var out []string
	for _, m := range digestEntry.FindAllStringSubmatch(v, -1) {
		h := strings.TrimSpace(m[1])
		if len(h) >= 16 {
			out = append(out, h)
			if t := strings.Trim(h, "\"'`.;|"); t != h && t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

// digestEntry matches a digest entry's user and hash.
var digestEntry = regexp.MustCompile(`(?i)digest:[^:,]*:([^:,]*)`)

// aclHashes returns the digest hashes in u's acl parameters.
// Besides, any text shaped like a SHA-1 in base64 anywhere in the query or
// the path is one: an entry mistyped (digest:ops:rd:HASH, ops:HASH:rd, a
// '?' or '&' for the other) still holds a hash (a re-test pass).
func aclHashes(u *url.URL) []string {
	var out []string
	aclPairs(u.RawQuery, func(raw, value string, ok bool) string {
		out = append(out, digestHashes(value)...)
		return raw
	})
	texts := []string{u.RawQuery, u.Path, u.RawPath}
	if q, err := url.PathUnescape(u.RawQuery); err == nil {
		texts = append(texts, q)
	}
	if q, err := url.QueryUnescape(u.RawQuery); err == nil {
		texts = append(texts, q) // '+' as a space, as url.Values reads it
	}
	for _, t := range texts {
		out = append(out, sha1Shape.FindAllString(t, -1)...)
	}
	for _, h := range out {
		if strings.Contains(h, "+") { // as url.Values reads it: an error may quote that
			out = append(out, strings.ReplaceAll(h, "+", " "))
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return out[:min(len(out), maxHashes)]
}

// maxHashes bounds the hash-shaped texts of one URL that are looked for in
// a text, each by a pattern of its own: a URL of thousands took seconds to
// redact (a re-test pass). No acl holds that many digest entries.
const maxHashes = 64

// sha1Shape is a SHA-1 in base64 (27 characters and "="), a '+' in it
// read as a space or not.
var sha1Shape = regexp.MustCompile(`[A-Za-z0-9+/ ]{27}=`)

// hideDigests is an acl value with its digest entries' hashes replaced.
func hideDigests(v string) string {
	for _, h := range digestHashes(v) {
		v = strings.ReplaceAll(v, h, "xxxxx")
	}
	return v
}

// Redact returns u as text with its password, the values of secret query
// parameters (TLS key files and passwords, other passwords, tokens) and
// the hashes of acl's digest entries replaced by "xxxxx", for errors and
// logs. url.URL.Redacted masks the password only.
func Redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := *u
	if _, ok := userToken(u); ok || listedUser(u) != "" {
		v.User = url.User("xxxxx")
	}
	if v.RawQuery != "" {
		q := v.Query()
		hidden := false
		for k, vs := range q {
			if secretParam(k) {
				for i := range vs {
					vs[i] = "xxxxx"
				}
				hidden = true
			}
		}
		if hidden {
			v.RawQuery = q.Encode()
		}
		v.RawQuery = aclPairs(v.RawQuery, func(raw, value string, ok bool) string {
			switch {
			case !ok:
				return "xxxxx" // unreadable, and it may hold a hash
			case hideDigests(value) == value:
				return raw
			}
			return valueText.Replace(hideDigests(value))
		})
	}
	out := v.Redacted()
	for _, h := range append(aclHashes(u), seeds(u)...) {
		// However the URL spells it: a hash with a %3d or %2f (lower case,
		// or any letter escaped) was shown (a re-test pass).
		out = spellings(h).ReplaceAllLiteralString(out, "xxxxx")
	}
	return sha1Shape.ReplaceAllString(out, "xxxxx")
}

// spellings matches s however a URL, or a backend quoting one, may spell
// it: each character as itself or percent-escaped (its UTF-8 bytes, hex in
// either case; a byte that is not UTF-8 as itself or escaped), a '+' also
// as a space (as url.Values reads it) and a space also as a '+'. Escapes
// come first among each character's spellings, so that a '%' followed by
// "25" is taken whole.
func spellings(s string) *regexp.Regexp {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteString("(?:")
		for _, c := range []byte(s[i : i+n]) {
			b.WriteString("%")
			for _, h := range fmt.Sprintf("%02x", c) {
				if h >= 'a' {
					fmt.Fprintf(&b, "[%c%c]", h, unicode.ToUpper(h))
				} else {
					b.WriteRune(h)
				}
			}
		}
		b.WriteString("|")
		// A byte that is not UTF-8 is matched as U+FFFD, as regexp reads
		// such a byte in the text.
		b.WriteString(regexp.QuoteMeta(string(r)))
		switch r {
		case '+':
			b.WriteString("| ")
		case ' ':
			b.WriteString(`|\+`)
		}
		b.WriteString(")")
		i += n
	}
	return regexp.MustCompile(b.String())
}

// valueText escapes what would end or garble a query value.
var valueText = strings.NewReplacer("%", "%25", "&", "%26", "#", "%23", " ", "%20", "+", "%2B", ";", "%3B")

// Secrets returns the texts Redact hides, as they are and as Go quotes
// them (%q: a backend quoting a bad entry escapes a '"', a '\\', a tab or
// invalid UTF-8 in it), so that an error's text can be stripped of them
// (RedactText finds each however it is percent-escaped).
func Secrets(u *url.URL) []string {
	if u == nil {
		return nil
	}
	var s []string
	if pw, ok := u.User.Password(); ok && pw != "" {
		s = append(s, pw)
	}
	if tok, ok := userToken(u); ok {
		s = append(s, tok)
	}
	if first := listedUser(u); first != "" {
		s = append(s, first, u.User.Username())
	}
	s = append(s, aclHashes(u)...)
	s = append(s, seeds(u)...)
	for k, vs := range u.Query() {
		if !secretParam(k) {
			continue
		}
		for _, v := range vs {
			if v != "" {
				s = append(s, v)
			}
		}
	}
	for _, v := range s {
		for _, q := range []string{strconv.Quote(v), strconv.QuoteToASCII(v)} {
			if q = q[1 : len(q)-1]; q != v {
				s = append(s, q)
			}
		}
	}
	slices.Sort(s)
	return slices.Compact(s)
}

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

// HasToken reports whether rawURL's user name is a token (nats://TOKEN@host),
// which goes in a file with token_file= rather than password_file=.
func HasToken(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	_, ok := userToken(u)
	return ok
}

// HasSecret reports whether rawURL itself holds a password or token (in its
// user info or a parameter named like one), an acl digest hash or an NKey
// seed, as a warning about passwords on command lines needs. A file's path
// (password_file=, key=, nkey=) does not count: the secret stays in the
// file.
func HasSecret(rawURL string) bool { return Kind(rawURL) != "" }

// Kind says what secret rawURL holds itself, for a warning's words: "seed"
// (an NKey seed), "token", "password" (user info, a password or token
// parameter), "hash" (an acl digest hash, which no file can hold), or "" if
// none.
func Kind(rawURL string) string {
	switch {
	case HasToken(rawURL):
		return "token"
	case hasPassword(rawURL): // before a seed: a long base32 password is no seed
		return "password"
	case HasSeed(rawURL):
		return "seed"
	case hasHash(rawURL):
		return "hash"
	}
	return ""
}

// hasHash reports whether rawURL holds an acl digest hash, or text shaped
// like one.
func hasHash(rawURL string) bool {
	if u, err := url.Parse(rawURL); err == nil {
		return len(aclHashes(u)) > 0
	}
	if _, q, ok := strings.Cut(rawURL, "?"); ok {
		q, _, _ = strings.Cut(q, "#")
		return len(digestHashes(q)) > 0 || sha1Shape.MatchString(q)
	}
	return false
}

// portNotNumber reports whether host (host:port, [v6]:port or a bare
// host) has a port that is not a number, or one past 65535: then it is
// most likely a password whose URL lost its "@host" (redis://:PASSWORD).
func portNotNumber(host string) bool {
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return false
		}
		host = "h" + host[end+1:]
	}
	k := strings.LastIndexByte(host, ':')
	if k < 0 || k == len(host)-1 {
		return false
	}
	n, err := strconv.Atoi(host[k+1:])
	return err != nil || n > 65535
}

// hasPassword reports whether rawURL holds a password in its user info or
// a parameter.
func hasPassword(rawURL string) bool {
	if u, err := url.Parse(rawURL); err == nil {
		if u.User == nil && slices.ContainsFunc(strings.Split(u.Host, ","), portNotNumber) {
			return true // redis://:98765432101: digits past a port's range
		}
		if pw, ok := u.User.Password(); ok && pw != "" {
			return true
		}
		if _, ok := userToken(u); ok {
			return true
		}
		if u.Opaque != "" && strings.Contains(u.Opaque, "@") { // redis:app:pw@host
			return strings.Contains(u.Opaque[:strings.LastIndex(u.Opaque, "@")], ":")
		}
		return querySecret(u.RawQuery)
	}
	// Unparsable: assume user info with a colon holds a password, and
	// read the query's pairs as written (a bad escape in the path or the
	// fragment kept a password= from the warning: a re-test pass). Without
	// an "@", a "port" that is no number is taken for a password that lost
	// its "@host" (redis://:PASSWORD, a re-test pass).
	if i := strings.Index(rawURL, "://"); i >= 0 {
		rest := rawURL[i+3:]
		if j := strings.LastIndex(rest, "@"); j >= 0 && strings.Contains(rest[:j], ":") {
			return true
		}
		authority := rest[:strings.IndexAny(rest+"/", "/?#")]
		if !strings.Contains(authority, "@") && slices.ContainsFunc(strings.Split(authority, ","), portNotNumber) {
			return true
		}
	}
	if _, q, ok := strings.Cut(rawURL, "?"); ok {
		q, _, _ = strings.Cut(q, "#")
		return querySecret(q)
	}
	return false
}

// HasSeed reports whether rawURL holds an NKey seed itself, which belongs
// in a file named by nkey=.
func HasSeed(rawURL string) bool {
	if v, err := url.PathUnescape(rawURL); err == nil {
		rawURL = v
	}
	return len(findSeeds(rawURL)) > 0
}

// querySecret reports whether rawQuery holds a password or token, reading
// each pair as written: url.Values drops a pair with a ';' or a bad escape,
// and with it the password that is on the command line all the same
// (ParseURL refuses the URL, after the fact).
func querySecret(rawQuery string) bool {
	for _, kv := range strings.FieldsFunc(rawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, _ := strings.Cut(kv, "=")
		if key, err := url.QueryUnescape(k); err == nil {
			k = key
		}
		n := strings.ToLower(k)
		if val, err := url.QueryUnescape(v); err == nil {
			v = val
		}
		// A parameter naming a file (password_file=, token_file=, key=,
		// passfile=, nkey=) keeps the secret in the file (a seed in its
		// place is HasSeed's).
		isPath := strings.HasSuffix(n, "file") || slices.Contains(pathParams, n)
		if secretParam(n) && v != "" && !isPath {
			return true
		}
	}
	return false
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
