package driver

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/dlock/dlock/internal/urlsecret"
)

// ParseURL parses a backend URL. The host part may list several hosts
// separated by commas ("redlock://h1:6379,h2:6379,h3:6379"); u.Host then
// holds the whole list (see Hosts). Unlike url.Parse, its errors never repeat
// the URL, which may hold a password. A password_file= parameter is
// resolved here, for every backend (see PasswordFileParam): ParseURL then
// reads that file, with no bound on time (see ParseURLContext).
func ParseURL(rawURL string) (*url.URL, error) {
	return ParseURLContext(context.Background(), rawURL)
}

// ParseURLContext is ParseURL, reading a password_file= until ctx ends at
// the latest: a named pipe whose writer never writes is an error then, not
// a hang.
func ParseURLContext(ctx context.Context, rawURL string) (*url.URL, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("%w: want scheme://..., e.g. mem:// or redis://host:6379", ErrInvalidURL)
	}
	// Split off the authority and, within it, the host list.
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	userinfo, hostlist := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hostlist = authority[:i+1], authority[i+1:]
	}
	hosts := strings.Split(hostlist, ",")
	bad := func(msg string) error {
		return fmt.Errorf("%w (%s URL): %s", ErrInvalidURL, strings.ToLower(scheme), redactString(msg, rawURL))
	}
	if userinfo == "" && splitUserinfo(authority, rest[end:]) {
		// "redis://app:Pa55/word9@host/db": the password's "/" ended the
		// authority early, so a part of it would be taken for a host and a
		// port, and the rest for a path, and be quoted by whatever then
		// refused them.
		return nil, fmt.Errorf("%w (%s URL): the user info seems to hold a / ? or #: percent-encode them in a password (%%2F %%3F %%23)",
			ErrInvalidURL, strings.ToLower(scheme))
	}
	for _, h := range hosts[1:] {
		if _, err := url.Parse("x://" + h); err != nil || h == "" {
			return nil, bad("bad host in host list")
		}
	}
	if strings.Contains(rest[end:], "#") {
		// No backend reads a fragment: it went unread, and with it
		// whatever a "#" cut off (a value's end).
		return nil, fmt.Errorf("%w (%s URL): a fragment (#…), which no backend reads: percent-encode a # in a value (%%23)",
			ErrInvalidURL, strings.ToLower(scheme))
	}
	u, err := url.Parse(scheme + "://" + userinfo + hosts[0] + rest[end:])
	if err != nil {
		msg := "malformed"
		if ue, ok := err.(*url.Error); ok {
			msg = ue.Err.Error()
		}
		// url.Parse quotes the part it refused, which can be a piece of the
		// password: say what was wrong, not where. Also without an "@": a
		// URL that lost its host (redis://:PASSWORD) reads the password as
		// a port, and "invalid port \":PASSWORD\"" showed it (a re-test pass).
		msg = dropQuoted(msg)
		if strings.Contains(rawURL, "@") {
			msg += " (percent-encode any of : / ? # @ % in the user info)"
		}
		return nil, bad(msg)
	}
	if _, err := url.ParseQuery(u.RawQuery); err != nil {
		// url.Values drops the pair it cannot read: a parameter, a ZooKeeper
		// acl= grant say, went unread without a word (a re-test pass). The
		// error is not quoted: it quotes the value, a password's piece.
		why := "a bad %-escape (write a % as %25)"
		if strings.Contains(err.Error(), "semicolon") {
			why = "a ';' (parameters are separated by '&', ZooKeeper acl= entries by ','; write a ; in a value as %3B)"
		}
		return nil, fmt.Errorf("%w (%s URL): a query parameter that cannot be read: %s", ErrInvalidURL, strings.ToLower(scheme), why)
	}
	for _, h := range hosts {
		if !strings.HasPrefix(h, "[") && strings.Count(h, ":") > 1 {
			// url.Parse took h:1:98765432101 (its last part is digits);
			// a client then quoted the "port" in its errors and logs.
			return nil, bad("a host with more than one ':' (an IPv6 address goes in brackets, [::1]:6379)")
		}
		if _, port, err := net.SplitHostPort(h); err == nil && port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				// Not quoted: digits past a port's range are as likely a
				// password whose URL lost its "@host" (redis://:98765432101,
				// a re-test pass).
				return nil, bad("a port out of range 1 to 65535")
			}
		}
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = hostlist
	if err := resolvePasswordFile(ctx, u); err != nil {
		return nil, bad(err.Error())
	}
	return u, nil
}

// Hosts returns the hosts of a URL parsed by ParseURL, split at commas.
func Hosts(u *url.URL) []string {
	if u.Host == "" {
		return nil
	}
	return strings.Split(u.Host, ",")
}

// splitUserinfo reports whether the first "@" of a URL whose authority
// (up to the first / ? or #) holds none comes before any query value and
// after an authority with a ":" in it: then the "@" most likely ends user
// info with a password that holds a / ? or # (an "@" in a query value, as in
// "?user=a@b", does not count).
func splitUserinfo(authority, after string) bool {
	j := strings.Index(after, "@")
	return j >= 0 && strings.Contains(authority, ":") && !strings.Contains(after[:j], "=")
}

// dropQuoted removes the quoted part of an error message ("invalid port
// \":Pa55\" after host" becomes "invalid port after host"): all from its
// first '"' to its last, or to its end if there is one alone. url.Parse
// quotes Go's way, so a '"' in the password comes escaped, and pairing the
// quotes one by one let the password's tail out (a re-test pass).
func dropQuoted(msg string) string {
	i, j := strings.IndexByte(msg, '"'), strings.LastIndexByte(msg, '"')
	switch {
	case i < 0:
		return msg
	case j == i:
		return strings.TrimRight(msg[:i], " ")
	}
	return strings.TrimRight(msg[:i], " ") + msg[j+1:]
}

func redactString(s, rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return urlsecret.RedactText(s, u)
	}
	// The URL did not parse: hide everything between "://" and the last "@".
	if i := strings.Index(rawURL, "://"); i >= 0 {
		if j := strings.LastIndex(rawURL, "@"); j > i {
			s = strings.ReplaceAll(s, rawURL[i+3:j], "xxxxx")
		}
	}
	return s
}
