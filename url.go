package dlock

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/dlock/dlock/driver"
)

// registry holds the registered backends. It is the only package state.
var registry struct {
	mu      sync.RWMutex
	openers map[string]driver.Opener
}

// Register makes a backend available to Open under a URL scheme. Backend
// packages call it from init; it panics if the scheme is empty or taken,
// since that is a programming error.
func Register(scheme string, o driver.Opener) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if scheme == "" || o == nil {
		panic("dlock: Register with empty scheme or nil opener")
	}
	if registry.openers == nil {
		registry.openers = map[string]driver.Opener{}
	}
	if _, dup := registry.openers[scheme]; dup {
		panic("dlock: Register called twice for scheme " + scheme)
	}
	registry.openers[scheme] = o
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	s := make([]string, 0, len(registry.openers))
	for k := range registry.openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Open connects to the backend named by rawURL's scheme, which must have been
// registered by importing the backend's package (for example
// github.com/dlock/dlock/memlock for "mem://"). Passwords in rawURL never
// appear in returned errors.
func Open(ctx context.Context, rawURL string, opts ...ClientOption) (*Client, error) {
	if ctx == nil {
		return nil, fmt.Errorf("dlock: open: %w", ErrNilContext)
	}
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	registry.mu.RLock()
	o := registry.openers[u.Scheme]
	registry.mu.RUnlock()
	if o == nil {
		return nil, fmt.Errorf("dlock: open %s: %w %q (forgotten import?); registered: %s",
			u.Redacted(), ErrUnknownScheme, u.Scheme, strings.Join(Schemes(), ", "))
	}
	d, err := o.OpenDriver(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("dlock: open %s: %w", u.Redacted(), redactErr(err, u))
	}
	return New(d, u.Scheme, opts...), nil
}

// ParseURL parses a backend URL. The host part may list several hosts
// separated by commas ("redlock://h1:6379,h2:6379,h3:6379"); u.Host then
// holds the whole list (see Hosts). Unlike url.Parse, its errors never repeat
// the URL, which may hold a password.
func ParseURL(rawURL string) (*url.URL, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("dlock: %w: want scheme://..., e.g. mem:// or redis://host:6379", ErrInvalidURL)
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
		return fmt.Errorf("dlock: %w (%s URL): %s", ErrInvalidURL, strings.ToLower(scheme), redactString(msg, rawURL))
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
	return u, nil
}

// Hosts returns the hosts of a URL parsed by ParseURL, split at commas.
func Hosts(u *url.URL) []string {
	if u.Host == "" {
		return nil
	}
	return strings.Split(u.Host, ",")
}

// redactErr hides the URL's password if err's text carries it.
func redactErr(err error, u *url.URL) error {
	pw, ok := u.User.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return &redacted{err: err, msg: strings.ReplaceAll(err.Error(), pw, "xxxxx")}
}

func redactString(s, rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			return strings.ReplaceAll(s, pw, "xxxxx")
		}
	}
	// The URL did not parse: hide everything between "://" and the last "@".
	if i := strings.Index(rawURL, "://"); i >= 0 {
		if j := strings.LastIndex(rawURL, "@"); j > i {
			s = strings.ReplaceAll(s, rawURL[i+3:j], "xxxxx")
		}
	}
	return s
}

// redacted keeps the cause reachable for errors.Is and errors.As while its
// text hides a password.
type redacted struct {
	err error
	msg string
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
