package drivertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// URLOpener returns an opener of clients of u.
func URLOpener(u string) func(ctx context.Context) (*dlock.Client, error) {
	return func(ctx context.Context) (*dlock.Client, error) { return dlock.Open(ctx, u) }
}

// MustOpen opens u (its backend's package must be imported), closed when t
// ends, or fails the test.
func MustOpen(t *testing.T, u string) *dlock.Client {
	t.Helper()
	c, err := dlock.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// WantInvalidURL wants dlock.Open(u) to fail with dlock.ErrInvalidURL and
// an error that says each of want and does not contain hidden (a secret
// the URL holds, such as a key file's path; none if empty).
func WantInvalidURL(t *testing.T, u, hidden string, want ...string) {
	t.Helper()
	_, err := openURL(t, u)
	t.Log(err)
	if !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("Open: %v; want ErrInvalidURL", err)
		return
	}
	if hidden != "" && strings.Contains(err.Error(), hidden) {
		t.Errorf("Open: %v; want an error that does not show %q", err, hidden)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open: %v; want it to say %q", err, w)
		}
	}
}

// MustHoldAs opens a client of u and locks name on it with ttl; the lease
// is unlocked and the client closed when t ends. It fails t if either
// cannot be had.
func MustHoldAs(t *testing.T, u, name string, ttl time.Duration) (*dlock.Client, *dlock.Lease) {
	t.Helper()
	c := MustOpen(t, u)
	l, err := c.Mutex(name, dlock.WithTTL(ttl)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	return c, l
}
