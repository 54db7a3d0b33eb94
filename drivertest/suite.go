package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"go.uber.org/goleak"
)

// Run runs the whole conformance suite. Its subtests run one after another,
// so timings are not disturbed by each other.
func Run(t *testing.T, newHarness NewHarness) {
	ctx := t.Context()
	h, err := newHarness(ctx, t)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	s := &suite{h: h, caps: h.Caps().withDefaults()}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"MutualExclusion", s.testMutualExclusion},
		{"TokensIncrease", s.testTokensIncrease},
		{"TryLockHeld", s.testTryLockHeld},
		{"StaleUnlock", s.testStaleUnlock},
		{"HolderDies", s.testHolderDies},
		{"RenewalKeepsLease", s.testRenewal},
		{"WithoutRenewalExpires", s.testWithoutRenewal},
		{"LossSignalled", s.testLossSignalled},
		{"DoCancelsOnLoss", s.testDoCancelsOnLoss},
		{"CancelWait", s.testCancelWait},
		{"Reentrancy", s.testReentrancy},
		{"CloseReleases", s.testCloseReleases},
		{"Inspect", s.testInspect},
		{"BadInput", s.testBadInput},
		{"NoGoroutineLeak", s.testNoLeak},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.fn)
	}
}

type suite struct {
	h    Harness
	caps Caps
}

// client opens a client closed at the end of the test.
func (s *suite) client(t *testing.T) *dlock.Client {
	t.Helper()
	c, err := s.h.NewClient(t.Context())
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lockName returns a name unique to the test.
func lockName(t *testing.T) string {
	return fmt.Sprintf("dlocktest/%s/%08x", strings.ReplaceAll(t.Name(), "/", "."), rand.Uint32())
}

func mustLock(t *testing.T, m *dlock.Mutex) *dlock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock(%s): %v", m.Name(), err)
	}
	return l
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

// 1. Mutual exclusion under contention, with an overlap detector and a
// read-sleep-write counter that loses updates if two holders overlap.
func (s *suite) testMutualExclusion(t *testing.T) {
	name := lockName(t)
	clients := []*dlock.Client{s.client(t), s.client(t)}
	const workers = 8
	var (
		inside  atomic.Int32
		counter int64 // only touched inside the lock
		done    atomic.Int64
		last    uint64 // last token seen inside the lock
		wg      sync.WaitGroup
	)
	deadline := time.Now().Add(1500 * time.Millisecond)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%len(clients)]
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				l, err := c.Mutex(name, dlock.WithTTL(5*time.Second)).Lock(ctx)
				cancel()
				if err != nil {
					t.Errorf("worker %d: Lock: %v", w, err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("worker %d: %d holders inside at once", w, n)
				}
				if tok := l.Token(); tok <= last {
					t.Errorf("worker %d: token %d not above previous holder's %d", w, tok, last)
				} else {
					last = tok
				}
				v := counter
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				counter = v + 1
				inside.Add(-1)
				if err := l.Unlock(t.Context()); err != nil {
					t.Errorf("worker %d: Unlock: %v", w, err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if counter != done.Load() {
		t.Fatalf("counter = %d after %d critical sections: lost updates", counter, done.Load())
	}
	if done.Load() < workers {
		t.Fatalf("only %d critical sections in 1.5s with %d workers", done.Load(), workers)
	}
	t.Logf("%d critical sections, tokens up to %d", done.Load(), last)
}

// 2. Fencing tokens strictly increase across holders and clients; re-entries
// share a token.
func (s *suite) testTokensIncrease(t *testing.T) {
	name := lockName(t)
	clients := []*dlock.Client{s.client(t), s.client(t)}
	var last uint64
	for i := range 10 {
		c := clients[i%2]
		l := mustLock(t, c.Mutex(name))
		if l.Token() <= last {
			t.Fatalf("round %d: token %d not above %d", i, l.Token(), last)
		}
		last = l.Token()
		unlock(t, l)
	}
	m := clients[0].Mutex(name)
	l1 := mustLock(t, m)
	l2 := mustLock(t, m)
	if l1.Token() != l2.Token() || l1.Token() <= last {
		t.Fatalf("re-entry tokens %d, %d; want equal and above %d", l1.Token(), l2.Token(), last)
	}
	unlock(t, l2)
	unlock(t, l1)
}

// 3. TryLock on a held lock gives ErrNotAcquired, from the same client and
// from another one, and leaves the holder alone.
func (s *suite) testTryLockHeld(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	l := mustLock(t, a.Mutex(name))
	wantNotAcquired(t, a, name)
	wantNotAcquired(t, b, name)
	if l.Err() != nil {
		t.Fatalf("holder's lease ended: %v", l.Err())
	}
	unlock(t, l)
	wantAcquired(t, b, name)
}

// 3b. Unlock by a stale owner (whose lease expired and was taken over)
// is refused and leaves the new holder's lock in place.
func (s *suite) testStaleUnlock(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	stale := mustLock(t, a.Mutex(name, dlock.WithTTL(s.caps.TTL), dlock.WithoutRenewal()))
	waitDone(t, stale, s.caps.TTL+s.caps.Slack+2*time.Second, "fixed lease")
	if !errors.Is(stale.Err(), dlock.ErrLeaseLost) {
		t.Fatalf("expired lease Err = %v; want ErrLeaseLost", stale.Err())
	}
	holder := mustLock(t, b.Mutex(name))
	if err := stale.Unlock(t.Context()); !errors.Is(err, dlock.ErrLeaseLost) {
		t.Fatalf("stale Unlock = %v; want ErrLeaseLost", err)
	}
	wantNotAcquired(t, a, name)
	if holder.Err() != nil {
		t.Fatalf("new holder's lease ended by a stale Unlock: %v", holder.Err())
	}
	info, err := b.Inspect(t.Context(), name)
	if err != nil || !info.Held || info.Owner != holder.Owner() {
		t.Fatalf("Inspect = %+v, %v; want held by %s", info, err, holder.Owner())
	}
	unlock(t, holder)
	if err := holder.Unlock(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock = %v; want ErrNotHeld", err)
	}

	// The store itself must refuse: a holder that has not yet noticed its
	// lock was taken over (long TTL, no renewal tick yet) unlocks.
	unaware := mustLock(t, a.Mutex(name, dlock.WithTTL(30*time.Second)))
	if err := s.h.Remove(t.Context(), name); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	holder = mustLock(t, b.Mutex(name))
	if err := unaware.Unlock(t.Context()); !errors.Is(err, dlock.ErrLeaseLost) {
		t.Fatalf("Unlock by the replaced holder = %v; want ErrLeaseLost", err)
	}
	wantNotAcquired(t, a, name)
	unlock(t, holder)
}

// 4. A holder whose connections are cut loses the lock within its TTL plus
// slack, is told so no later than the waiter gets it, and the waiter gets it.
func (s *suite) testHolderDies(t *testing.T) {
	name := lockName(t)
	dead, b := s.client(t), s.client(t)
	l := mustLock(t, dead.Mutex(name, dlock.WithTTL(s.caps.TTL)))
	var lostAt atomic.Int64
	go func() {
		<-l.Done()
		lostAt.Store(time.Now().UnixNano())
	}()
	if err := s.h.Cut(t.Context(), dead); err != nil {
		t.Fatalf("Cut: %v", err)
	}
	cut := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), s.caps.TTL+s.caps.Slack+time.Second)
	defer cancel()
	got, err := b.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatalf("waiter did not get the lock within TTL+slack after the holder died: %v", err)
	}
	gotAt := time.Now()
	defer unlock(t, got)
	waitDone(t, l, time.Second, "cut holder")
	if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
		t.Fatalf("cut holder's Err = %v; want ErrLeaseLost", l.Err())
	}
	// The holder must hear of the loss before (or as) the waiter is granted;
	// 50ms covers the scheduling of the goroutines that observe both. A
	// connection-bound lock ends with its connection, and its holder hears
	// of it at its next renewal.
	bound := 50 * time.Millisecond
	if s.caps.ConnBound {
		bound = s.caps.TTL/3 + s.caps.Slack
	}
	if late := time.Unix(0, lostAt.Load()).Sub(gotAt); late > bound {
		t.Fatalf("holder told of its loss %v after the waiter got the lock", late)
	}
	t.Logf("waiter got the lock %v after the cut (TTL %v)", gotAt.Sub(cut), s.caps.TTL)
}

// 5. Renewal keeps a lease alive for more than 3 TTLs.
func (s *suite) testRenewal(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	l := mustLock(t, a.Mutex(name, dlock.WithTTL(s.caps.TTL)))
	time.Sleep(3*s.caps.TTL + s.caps.TTL/2)
	if l.Err() != nil {
		t.Fatalf("renewed lease ended: %v", l.Err())
	}
	wantNotAcquired(t, b, name)
	unlock(t, l)
	wantAcquired(t, b, name)
}

// 5b. WithoutRenewal expires on time: not much before its TTL and not after.
func (s *suite) testWithoutRenewal(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	start := time.Now()
	l := mustLock(t, a.Mutex(name, dlock.WithTTL(s.caps.TTL), dlock.WithoutRenewal()))
	waitDone(t, l, s.caps.TTL+s.caps.Slack, "fixed lease")
	if d := time.Since(start); d < (s.caps.TTL-s.caps.EarlyExpiry)*9/10 {
		t.Fatalf("fixed lease of TTL %v ended after %v", s.caps.TTL, d)
	}
	if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
		t.Fatalf("Err = %v; want ErrLeaseLost", l.Err())
	}
	ctx, cancel := context.WithTimeout(t.Context(), s.caps.Slack+time.Second)
	defer cancel()
	got, err := b.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatalf("lock not free after the fixed lease expired: %v", err)
	}
	unlock(t, got)
	if err := l.Unlock(t.Context()); !errors.Is(err, dlock.ErrLeaseLost) {
		t.Fatalf("Unlock of an expired lease = %v; want ErrLeaseLost", err)
	}
}

// 6. A lock removed behind its holder's back is reported lost within a
// renewal interval (plus slack).
func (s *suite) testLossSignalled(t *testing.T) {
	name := lockName(t)
	a := s.client(t)
	l := mustLock(t, a.Mutex(name, dlock.WithTTL(s.caps.TTL)))
	if err := s.h.Remove(t.Context(), name); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	waitDone(t, l, s.caps.TTL/3+s.caps.Slack, "removed lock")
	if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
		t.Fatalf("Err = %v; want ErrLeaseLost", l.Err())
	}
	if err := l.Unlock(t.Context()); !errors.Is(err, dlock.ErrLeaseLost) {
		t.Fatalf("Unlock of a lost lease = %v; want ErrLeaseLost", err)
	}
}

// 6b. Do cancels the context it passes when the lease is lost.
func (s *suite) testDoCancelsOnLoss(t *testing.T) {
	name := lockName(t)
	a := s.client(t)
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- dlock.Do(t.Context(), a.Mutex(name, dlock.WithTTL(s.caps.TTL)), func(ctx context.Context, l *dlock.Lease) error {
			close(started)
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), dlock.ErrLeaseLost) {
				return fmt.Errorf("ctx cause = %v; want ErrLeaseLost", context.Cause(ctx))
			}
			return ctx.Err()
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not run its function")
	}
	if err := s.h.Remove(t.Context(), name); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, dlock.ErrLeaseLost) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v; want ErrLeaseLost and the function's context.Canceled", err)
		}
	case <-time.After(s.caps.TTL/3 + s.caps.Slack + time.Second):
		t.Fatal("Do's context not cancelled after the lease was lost")
	}
	// Do with a function that succeeds returns nil and releases the lock.
	err := dlock.Do(t.Context(), a.Mutex(name), func(context.Context, *dlock.Lease) error { return nil })
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	wantAcquired(t, a, name)
}

// 7. Cancelling a wait returns promptly and leaves no waiter behind.
func (s *suite) testCancelWait(t *testing.T) {
	name := lockName(t)
	a, b, c := s.client(t), s.client(t), s.client(t)
	l := mustLock(t, a.Mutex(name))
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Mutex(name).Lock(ctx)
		errc <- err
	}()
	dctx, dcancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer dcancel()
	if _, err := c.Mutex(name).Lock(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with a deadline = %v; want context.DeadlineExceeded", err)
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock = %v; want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("cancelled Lock did not return within 2s")
	}
	info, err := a.Inspect(t.Context(), name)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if info.Waiters != 0 {
		t.Fatalf("Inspect shows %d waiters after both waits ended", info.Waiters)
	}
	unlock(t, l)
	// Had a cancelled waiter left a record (a queue place, a node), this
	// TryLock would fail behind it.
	wantAcquired(t, c, name)
}

// 8. Re-entry by owner counts holds; the lock is released at zero.
func (s *suite) testReentrancy(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	owner := dlock.NewOwnerID()
	m := a.Mutex(name, dlock.WithOwner(owner))
	l1 := mustLock(t, m)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	l2, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("re-entrant Lock: %v", err)
	}
	l3, err := a.Mutex(name, dlock.WithOwner(owner)).TryLock(ctx)
	if err != nil {
		t.Fatalf("re-entrant TryLock through another Mutex of the owner: %v", err)
	}
	if s.caps.StoreReentrant {
		info, err := a.Inspect(t.Context(), name)
		if err != nil || info.Holds != 3 || info.Owner != owner {
			t.Fatalf("Inspect = %+v, %v; want 3 holds by %s", info, err, owner)
		}
		// Another client (process) with the same owner id re-enters too.
		l4, err := b.Mutex(name, dlock.WithOwner(owner)).TryLock(ctx)
		if err != nil {
			t.Fatalf("re-entry from another client: %v", err)
		}
		unlock(t, l4)
	}
	unlock(t, l1)
	wantNotAcquired(t, b, name)
	unlock(t, l3)
	wantNotAcquired(t, b, name)
	if l2.Err() != nil {
		t.Fatalf("remaining hold ended: %v", l2.Err())
	}
	unlock(t, l2)
	wantAcquired(t, b, name)
}

// 8b. Client.Close releases everything it held.
func (s *suite) testCloseReleases(t *testing.T) {
	base := lockName(t)
	a, b := s.client(t), s.client(t)
	var leases []*dlock.Lease
	for i := range 3 {
		leases = append(leases, mustLock(t, a.Mutex(fmt.Sprintf("%s/%d", base, i))))
	}
	leases = append(leases, mustLock(t, a.Mutex(base+"/r", dlock.WithOwner("same"))),
		mustLock(t, a.Mutex(base+"/r", dlock.WithOwner("same"))))
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, l := range leases {
		select {
		case <-l.Done():
		default:
			t.Fatalf("lease %s live after Close", l.Name())
		}
		if !errors.Is(l.Err(), dlock.ErrClosed) {
			t.Fatalf("lease Err after Close = %v; want ErrClosed", l.Err())
		}
	}
	for i := range 3 {
		wantAcquired(t, b, fmt.Sprintf("%s/%d", base, i))
	}
	wantAcquired(t, b, base+"/r")
	if _, err := a.Mutex(base).TryLock(t.Context()); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("TryLock after Close = %v; want ErrClosed", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Inspect reports the holder, its token and a positive time left.
func (s *suite) testInspect(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	info, err := b.Inspect(t.Context(), name)
	if err != nil || info.Held {
		t.Fatalf("Inspect of a free lock = %+v, %v", info, err)
	}
	l := mustLock(t, a.Mutex(name, dlock.WithTTL(10*time.Second)))
	info, err = b.Inspect(t.Context(), name)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	ttlOK := info.TTL > 0 && info.TTL <= 10*time.Second
	if s.caps.ConnBound || s.caps.SessionBound { // held while a connection or session lives: no time left
		ttlOK = info.TTL == 0
	}
	if !info.Held || info.Owner != l.Owner() || info.Token != l.Token() || !ttlOK {
		t.Fatalf("Inspect = %+v; want held by %s with token %d and 0 < TTL <= 10s (0 if connection-bound)", info, l.Owner(), l.Token())
	}
	unlock(t, l)
}

// 9. Bad input gives typed errors, never a panic.
func (s *suite) testBadInput(t *testing.T) {
	a := s.client(t)
	ctx := t.Context()
	var nilCtx context.Context
	name := lockName(t)
	for _, tc := range []struct {
		what string
		m    *dlock.Mutex
		want error
	}{
		{"empty name", a.Mutex(""), dlock.ErrInvalidName},
		{"8 KiB name", a.Mutex(strings.Repeat("n", 8<<10)), dlock.ErrInvalidName},
		{"NUL in name", a.Mutex("a\x00b"), dlock.ErrInvalidName},
		{"invalid UTF-8", a.Mutex("a\xffb"), dlock.ErrInvalidName},
		{"zero TTL", a.Mutex(name, dlock.WithTTL(0)), dlock.ErrInvalidTTL},
		{"negative TTL", a.Mutex(name, dlock.WithTTL(-time.Second)), dlock.ErrInvalidTTL},
		{"1ns TTL", a.Mutex(name, dlock.WithTTL(time.Nanosecond)), dlock.ErrInvalidTTL},
		{"long owner", a.Mutex(name, dlock.WithOwner(strings.Repeat("o", 4096))), dlock.ErrInvalidOwner},
		{"nil context", a.Mutex(name), dlock.ErrNilContext},
	} {
		c := ctx
		if tc.want == dlock.ErrNilContext {
			c = nilCtx
		}
		if _, err := tc.m.Lock(c); !errors.Is(err, tc.want) {
			t.Errorf("%s: Lock = %v; want %v", tc.what, err, tc.want)
		}
		if _, err := tc.m.TryLock(c); !errors.Is(err, tc.want) {
			t.Errorf("%s: TryLock = %v; want %v", tc.what, err, tc.want)
		}
	}
	if _, err := a.Inspect(ctx, ""); !errors.Is(err, dlock.ErrInvalidName) {
		t.Errorf("Inspect(\"\") = %v; want ErrInvalidName", err)
	}
	if _, err := a.Inspect(nilCtx, name); !errors.Is(err, dlock.ErrNilContext) {
		t.Errorf("Inspect(nil ctx) = %v; want ErrNilContext", err)
	}
	if err := dlock.Do(nilCtx, a.Mutex(name), nil); !errors.Is(err, dlock.ErrNilContext) {
		t.Errorf("Do(nil ctx) = %v; want ErrNilContext", err)
	}
	l := mustLock(t, a.Mutex(name))
	if err := l.Unlock(nilCtx); !errors.Is(err, dlock.ErrNilContext) {
		t.Errorf("Unlock(nil ctx) = %v; want ErrNilContext", err)
	}
	unlock(t, l)
	// The name in errors, for operators.
	_, err := a.Mutex("").Lock(ctx)
	var de *dlock.Error
	if !errors.As(err, &de) || de.Backend != a.Backend() || de.Op != "lock" {
		t.Errorf("error %v is not a *dlock.Error naming op and backend", err)
	}
}

// 10. Nothing is left running after Close.
func (s *suite) testNoLeak(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	name := lockName(t)
	a, err := s.h.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.h.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	l := mustLock(t, a.Mutex(name, dlock.WithTTL(s.caps.TTL)))
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	_, _ = b.Mutex(name).Lock(ctx) // a wait that times out
	cancel()
	waitc := make(chan error, 1)
	go func() { _, err := b.Mutex(name).Lock(t.Context()); waitc <- err }() // a wait that Close ends
	time.Sleep(50 * time.Millisecond)
	unlock(t, l)
	_ = mustLock(t, a.Mutex(name+"/held", dlock.WithTTL(s.caps.TTL)))
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-waitc:
	case <-time.After(5 * time.Second):
		t.Fatal("Lock still waiting after its client closed")
	}
	goleak.VerifyNone(t, opts)
}
