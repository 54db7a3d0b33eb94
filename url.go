package dlock

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

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
// github.com/dlock/dlock/memlock for "mem://"). Passwords in rawURL, and
// the values of its secret parameters (TLS key files, key passwords, tokens:
// see driver.Redacted), never appear in returned errors.
func Open(ctx context.Context, rawURL string, opts ...ClientOption) (*Client, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w (open)", ErrNilContext)
	}
	u, err := driver.ParseURLContext(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	registry.mu.RLock()
	o := registry.openers[u.Scheme]
	registry.mu.RUnlock()
	if o == nil {
		return nil, fmt.Errorf("%w %q (forgotten import?); registered: %s; opening %s",
			ErrUnknownScheme, u.Scheme, strings.Join(Schemes(), ", "), shownURL(u))
	}
	co := clientOptions{logger: slog.Default()}
	for _, opt := range opts {
		opt(&co)
	}
	d, err := o.OpenDriver(driver.WithLogger(ctx, co.logger), u)
	if err != nil {
		return nil, fmt.Errorf("dlock: open %s: %w", shownURL(u), driver.RedactError(err, u))
	}
	return New(d, u.Scheme, opts...), nil
}

// maxShownURL is how much of a URL an error repeats.
const maxShownURL = 256

// shownURL is u as errors show it: redacted, and cut at maxShownURL bytes
// (at a character's start), so a URL with a huge parameter does not make a
// huge error.
func shownURL(u *url.URL) string {
	s := driver.Redacted(u)
	if rest, ok := strings.CutPrefix(s, u.Scheme+":"); ok && !strings.HasPrefix(rest, "//") && u.Opaque == "" {
		s = u.Scheme + "://" + rest // a URL with no host prints as "redis:", which read "open redis:: …"
	}
	if len(s) <= maxShownURL {
		return s
	}
	cut := maxShownURL
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}
