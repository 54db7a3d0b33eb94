package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// Run runs the whole conformance suite: the core contract, then the
// sections Kinds, Election, LockAll and List, then those the harness opts
// into by the interfaces it implements (DriverHarness, TLSHarness,
// ACLHarness). Its subtests run one after another, so timings are not
// disturbed by each other.
func Run(t *testing.T, newHarness NewHarness) {
	h, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	s := &suite{h: h, caps: h.Caps().withDefaults()}
	s.run(t)
	if dh, ok := h.(DriverHarness); ok {
		t.Run("DriverKinds", func(t *testing.T) { s.driverKinds(t, dh) })
	}
	if th, ok := h.(TLSHarness); ok {
		t.Run("TLS", func(t *testing.T) { runTLS(t, th.TLS(t)) })
	}
	if ah, ok := h.(ACLHarness); ok {
		t.Run("LeastPrivilege", func(t *testing.T) {
			lh, err := ah.LeastPrivilege(t.Context(), t)
			if err != nil {
				t.Fatalf("least-privilege harness: %v", err)
			}
			(&suite{h: lh, caps: lh.Caps().withDefaults()}).run(t)
		})
	}
}

// run runs the sections every backend runs.
func (s *suite) run(t *testing.T) {
	s.runAll(t, []test{
		{"MutualExclusion", s.testMutualExclusion},
		{"SharedMutexExcludes", s.testSharedMutexExcludes},
		{"TokensIncrease", s.testTokensIncrease},
		{"TryLockHeld", s.testTryLockHeld},
		{"StaleUnlock", s.testStaleUnlock},
		{"HolderDies", s.testHolderDies},
		{"RenewalKeepsLease", s.testRenewal},
		{"WithoutRenewalExpires", s.testWithoutRenewal},
		{"Extend", s.testExtend},
		{"LossSignalled", s.testLossSignalled},
		{"ForceUnlockToken", s.testForceUnlockToken},
		{"DoCancelsOnLoss", s.testDoCancelsOnLoss},
		{"CancelWait", s.testCancelWait},
		{"CancelledWaitTakesNothing", s.testCancelledWaitTakesNothing},
		{"CancelAtGrant", s.testCancelAtGrant},
		{"DeadlineInRoundTrip", s.testDeadlineInRoundTrip},
		{"Reentrancy", s.testReentrancy},
		{"SharedOwnerTTLs", s.testSharedOwnerTTLs},
		{"NestedDoReenters", s.testNestedDoReenters},
		{"NestedLockRacingUnlock", s.testNestedLockRacingUnlock},
		{"DoWaitBound", s.testDoWaitBound},
		{"CloseReleases", s.testCloseReleases},
		{"CloseDuringWait", s.testCloseDuringWait},
		{"Inspect", s.testInspect},
		{"BadInput", s.testBadInput},
		{"Kinds", s.testKinds}, // read-write locks and semaphores (kinds.go)
		{"Election", s.testElection},
		{"LockAll", s.testLockAll},
		{"List", s.testList},
		{"NoGoroutineLeak", s.testNoLeak},
	})
}

// test is one subtest of a section.
type test struct {
	name string
	fn   func(t *testing.T)
}

func (s *suite) runAll(t *testing.T, tests []test) {
	for _, tc := range tests {
		t.Run(tc.name, tc.fn)
	}
}

type suite struct {
	h    Harness
	caps Caps
}

// client opens a client closed at the end of the test.
func (s *suite) client(t *testing.T) *dlock.Client { t.Helper(); return Client(t, s.h) }

// Client opens a client of h, or fails the test (or benchmark), and closes
// it when the test ends.
func Client(tb testing.TB, h Harness) *dlock.Client {
	tb.Helper()
	c, err := h.NewClient(tb.Context())
	if err != nil {
		tb.Fatalf("NewClient: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// remove deletes the lock named name behind its holder's back: with the
// harness's Remove if it has one, else with ForceUnlock from a new client.
func (s *suite) remove(ctx context.Context, name string) error {
	if r, ok := s.h.(Remover); ok {
		return r.Remove(ctx, name)
	}
	return RemoveWith(ctx, s.h.NewClient, name)
}

// lockName returns a name unique to the test.
func lockName(t *testing.T) string {
	return fmt.Sprintf("dlocktest/%s/%08x", strings.ReplaceAll(t.Name(), "/", "."), rand.Uint32())
}

func mustLock(t *testing.T, m *dlock.Mutex) *dlock.Lease {
	t.Helper()
	return mustTake(t, "Lock", m.Name(), m.Lock)
}

func unlock(t *testing.T, l *dlock.Lease) {
	t.Helper()
	if err := l.Unlock(t.Context()); err != nil {
		t.Errorf("Unlock(%s): %v", l.Name(), err)
	}
}

// wantNotAcquired asserts that a TryLock by a new owner on c fails.
func wantNotAcquired(t *testing.T, c *dlock.Client, name string) {
	t.Helper()
	l, err := c.Mutex(name).TryLock(t.Context())
	if err == nil {
		_ = l.Unlock(t.Context())
		t.Fatalf("TryLock(%s) succeeded; want ErrNotAcquired", name)
	}
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock(%s): %v; want ErrNotAcquired", name, err)
	}
}

// wantAcquired asserts that a TryLock by a new owner on c succeeds, and unlocks.
func wantAcquired(t *testing.T, c *dlock.Client, name string) {
	t.Helper()
	l, err := c.Mutex(name).TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock(%s): %v; want it free", name, err)
	}
	unlock(t, l)
}

// waitDone waits up to d for l to end, and returns how long it took.
func waitDone(t *testing.T, l *dlock.Lease, d time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-l.Done():
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("%s: lease of %s still live after %v", what, l.Name(), d)
		return 0
	}
}
