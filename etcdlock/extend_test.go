package etcdlock_test

import (
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/etcdlock"
)

// An Extend whose session lease's keepalive is late (as a loaded process's
// is; here paused) still moves the lease's expiry: the session is refreshed
// for it. Before, the Extend returned nil while the lease kept the session's
// old expiry, its original one, and ended there (seen in drivertest's
// Extend under load).
func TestExtendWithLateSessionKeepalive(t *testing.T) {
	c := open(t, embedded(t)...)
	const ttl = 2 * time.Second
	l, err := c.Mutex("extend/late-keepalive", dlock.WithTTL(ttl), dlock.WithoutRenewal()).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	etcdlock.PauseKeepAlives(c)
	old := time.Now().Add(l.TimeLeft())
	// Time passes with no keepalive: the session's lease is known to live
	// only until the lock's original expiry.
	time.Sleep(ttl / 4)
	sent := time.Now()
	if err := l.Extend(t.Context(), 2*ttl); err != nil {
		t.Fatal(err)
	}
	// The extension is bounded by the session's TTL, from when it was sent;
	// a tenth of the TTL is room for the loss margin.
	got := time.Now().Add(l.TimeLeft())
	if want := sent.Add(ttl - ttl/10); got.Before(want) {
		t.Fatalf("after Extend the lease ends %v after the original expiry; want at least %v (its session's TTL from the Extend)",
			got.Sub(old).Round(time.Millisecond), want.Sub(old).Round(time.Millisecond))
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}
