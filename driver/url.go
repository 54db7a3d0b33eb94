package driver

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/dlock/dlock/internal/urlsecret"
)

// ParseURL parses a backend URL. The host part may list several hosts
// separated by commas ("redlock://h1:6379,h2:6379,h3:6379"); u.Host then
// holds the whole list (see Hosts). Unlike url.Parse, its errors never repeat
// the URL, which may hold a password. A password_file= parameter is
// resolved here, for every backend (see PasswordFileParam): ParseURL then
// reads that file.
func ParseURL(rawURL string) (*url.URL, error) {
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
	for _, h := range hosts[1:] {
		if _, err := url.Parse("x://" + h); err != nil || h == "" {
			return nil, bad("bad host in host list")
		}
	}
	u, err := url.Parse(scheme + "://" + userinfo + hosts[0] + rest[end:])
	if err != nil {
		msg := "malformed"
		if ue, ok := err.(*url.Error); ok {
			msg = ue.Err.Error()
		}
		return nil, bad(msg)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = hostlist
	if err := resolvePasswordFile(u); err != nil {
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
