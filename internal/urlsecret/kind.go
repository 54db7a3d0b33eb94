package urlsecret

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

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
