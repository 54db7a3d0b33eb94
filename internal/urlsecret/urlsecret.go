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
