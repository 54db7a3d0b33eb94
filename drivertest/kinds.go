package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// The conformance tests of read-write locks and semaphores (issue #17). They
// run when the backend has the kind (Caps.Kinds), and otherwise check that
// making one is refused with ErrUnsupported.

func (s *suite) testKinds(t *testing.T) {
	c := s.client(t)
	rwOK, semOK := s.hasKind(t, c, true), s.hasKind(t, c, false)
	tests := []struct {
		name string
		ok   bool
		fn   func(t *testing.T)
	}{
		{"FamiliesApart", rwOK && semOK, s.testFamiliesApart},
		{"RWReadersShare", rwOK, s.testReadersShare},
		{"RWWriterExcludes", rwOK, s.testWriterExcludes},
		{"RWWaitingWriterBlocksReaders", rwOK, s.testWaitingWriterBlocksReaders},
		{"RWWriterUnderReaderStream", rwOK, s.testWriterUnderReaderStream},
		{"RWTokens", rwOK, s.testRWTokens},
		{"RWReentry", rwOK, s.testRWReentry},
		{"RWDeadReaderFreed", rwOK, s.testDeadReaderFreed},
		{"RWInspect", rwOK, s.testRWInspect},
		{"RWReadNestedRace", rwOK, func(t *testing.T) { s.testKindNestedRace(t, readKind) }},
		{"RWWriteNestedRace", rwOK, func(t *testing.T) { s.testKindNestedRace(t, writeKind) }},
		{"RWCancelledWaitTakesNothing", rwOK, s.testRWCancelledWaitTakesNothing},
		{"RWForceUnlock", rwOK, func(t *testing.T) { s.testKindForceUnlock(t, true) }},
		{"RWForceUnlockTokens", rwOK, func(t *testing.T) { s.testKindForceUnlockTokens(t, true) }},
		{"RWDeadlineInRoundTrip", rwOK, func(t *testing.T) { s.testKindsDeadlineInRoundTrip(t, true) }},
		{"SemaphoreCount", semOK, func(t *testing.T) { s.testSemaphoreCount(t, false) }},
		{"SemaphoreCountHolderCut", semOK, func(t *testing.T) { s.testSemaphoreCount(t, true) }},
		{"SemaphoreTokens", semOK, s.testSemaphoreTokens},
		{"SemaphoreDeadHolderFreed", semOK, s.testDeadPermitFreed},
		{"SemaphoreLimitMismatch", semOK, s.testLimitMismatch},
		{"SemaphoreInspect", semOK, s.testSemaphoreInspect},
		{"SemaphoreNestedRace", semOK, func(t *testing.T) { s.testKindNestedRace(t, permitKind) }},
		{"SemaphoreCancelledWaitTakesNothing", semOK, s.testSemaphoreCancelledWaitTakesNothing},
		{"SemaphoreForceUnlock", semOK, func(t *testing.T) { s.testKindForceUnlock(t, false) }},
		{"SemaphoreForceUnlockTokens", semOK, func(t *testing.T) { s.testKindForceUnlockTokens(t, false) }},
		{"SemaphoreDeadlineInRoundTrip", semOK, func(t *testing.T) { s.testKindsDeadlineInRoundTrip(t, false) }},
		{"SemaphoreSharedOwnerTTLs", semOK, func(t *testing.T) {
			s.sharedOwnerTTLs(t, func(ctx context.Context, c *dlock.Client, name string, opts ...dlock.Option) (*dlock.Lease, error) {
				return c.Semaphore(name, 1, opts...).Acquire(ctx)
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Skip("the backend has not this kind")
			}
			tc.fn(t)
		})
	}
}

// hasKind reports whether c's backend has read-write locks (rw) or
// semaphores; if not, it checks that every method says why.
func (s *suite) hasKind(t *testing.T, c *dlock.Client, rw bool) bool {
	t.Helper()
	name := lockName(t) + "/probe"
	var l *dlock.Lease
	var err error
	if rw {
		l, err = c.RWMutex(name).TryRLock(t.Context())
	} else {
		l, err = c.Semaphore(name, 1).TryAcquire(t.Context())
	}
	if err == nil {
		unlock(t, l)
		return true
	}
	if !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("probe of kind (rw %v): %v; want a lease or ErrUnsupported", rw, err)
	}
	if rw {
		_, err = c.RWMutex(name).Lock(t.Context())
		_, ierr := c.RWMutex(name).Inspect(t.Context())
		err = errors.Join(err, ierr)
	} else {
		_, err = c.Semaphore(name, 3).Acquire(t.Context())
		_, ierr := c.Semaphore(name, 1).Inspect(t.Context())
		err = errors.Join(err, ierr)
	}
	if !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("kind (rw %v) unsupported by TryLock but: %v", rw, err)
	}
	t.Logf("kind (rw %v) unsupported: %v", rw, err)
	return false
}

func waitCtx(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), 10*time.Second)
}

// mustTake takes a lease with take (what and name say which), bounded by
// waitCtx, and fails t if it cannot.
func mustTake(t *testing.T, what, name string, take func(context.Context) (*dlock.Lease, error)) *dlock.Lease {
	t.Helper()
	ctx, cancel := waitCtx(t)
	defer cancel()
	l, err := take(ctx)
	if err != nil {
		t.Fatalf("%s(%s): %v", what, name, err)
	}
	return l
}

func mustRLock(t *testing.T, rw *dlock.RWMutex) *dlock.Lease {
	t.Helper()
	return mustTake(t, "RLock", rw.Name(), rw.RLock)
}

func mustWLock(t *testing.T, rw *dlock.RWMutex) *dlock.Lease {
	t.Helper()
	return mustTake(t, "Lock", rw.Name(), rw.Lock)
}

func mustAcquire(t *testing.T, sem *dlock.Semaphore) *dlock.Lease {
	t.Helper()
	return mustTake(t, "Acquire", sem.Name(), sem.Acquire)
}

func wantRefused(t *testing.T, what string, l *dlock.Lease, err error) {
	t.Helper()
	if err == nil {
		_ = l.Unlock(t.Context())
		t.Fatalf("%s succeeded; want ErrNotAcquired", what)
	}
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("%s: %v; want ErrNotAcquired", what, err)
	}
}
