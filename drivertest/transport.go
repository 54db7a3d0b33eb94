package drivertest

import (
	"context"
	"errors"
	"testing"

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
