package drivertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// RunCore runs the part of the suite that needs no fault injection —
// exclusion under contention, fencing tokens, TryLock, stale unlocks,
// renewal, re-entry, Close and Inspect — against clients from open, each a
// new client of the same store (as another process would open it). It
// proves a way of connecting (TLS, a restricted account) keeps the core of
// the contract, in a few seconds, where the whole suite already runs on a
// plain connection.
func RunCore(t *testing.T, open func(ctx context.Context) (*dlock.Client, error), caps Caps) {
	s := &suite{h: openHarness{open: open, caps: caps}, caps: caps.withDefaults()}
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"MutualExclusion", s.testMutualExclusion},
		{"TokensIncrease", s.testTokensIncrease},
		{"TryLockHeld", s.testTryLockHeld},
		{"StaleUnlock", s.testStaleUnlock},
		{"RenewalKeepsLease", s.testRenewal},
		{"Reentrancy", s.testReentrancy},
		{"CloseReleases", s.testCloseReleases},
		{"Inspect", s.testInspect},
	} {
		t.Run(tc.name, tc.fn)
	}
}

// openHarness is a Harness over an open function: it cannot cut a client.
type openHarness struct {
	open func(ctx context.Context) (*dlock.Client, error)
	caps Caps
}

func (h openHarness) NewClient(ctx context.Context) (*dlock.Client, error) { return h.open(ctx) }

func (h openHarness) Cut(context.Context, *dlock.Client) error {
	return errors.New("drivertest: RunCore cannot cut a client's connections")
}

func (h openHarness) Remove(ctx context.Context, name string) error {
	return RemoveWith(ctx, h.open, name)
}

func (h openHarness) Caps() Caps { return h.caps }

// openURL opens u, bounded by 20s, and closes the client at cleanup.
func openURL(t *testing.T, u string) (*dlock.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := dlock.Open(ctx, u)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// CheckURL opens two clients of the URL u (its backend's package must be
// imported) and checks a lock round trip and contention between them: the
// quick proof that a way of connecting works.
func CheckURL(t *testing.T, u string) {
	t.Helper()
	a, err := openURL(t, u)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	b, err := openURL(t, u)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	name := lockName(t)
	l, err := a.Mutex(name).Lock(t.Context())
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if _, err := b.Mutex(name).TryLock(t.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock = %v; want ErrNotAcquired", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	l2, err := b.Mutex(name).TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if err := l2.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// WantOpenError wants dlock.Open(u) to fail within 30s (not to hang) with
// an error whose text contains each of want, and returns it.
func WantOpenError(t *testing.T, u string, want ...string) error {
	t.Helper()
	start := time.Now()
	_, err := openURL(t, u)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("Open(%s) succeeded", u)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open(%s) = %v; want it to say %q", u, err, w)
		}
	}
	if took > 30*time.Second {
		t.Errorf("Open(%s) took %v to fail", u, took)
	}
	t.Logf("%v (after %v)", err, took.Round(time.Millisecond))
	return err
}
