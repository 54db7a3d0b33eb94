package dlock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
)

// Adversarial schedules against the portable layer, on the in-package fake
// store. The fake keeps each lock's expiry, which is the model of the store
// the tests check the client against: the client must never believe it
// holds a lease past the store's expiry of it.

// storeExpiry is the fake store's expiry of name's lock (zero if none).
func storeExpiry(d *fakeDriver, name string) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.locks[name].expires
}

// clientExpiry is what the client believes of l's hold: its expiry and
// its loss deadline.
func clientExpiry(l *Lease) (expiry, deadline time.Time) {
	st := l.c.e.Sched().State(l.hold().Entry())
	return st.Expiry, st.Deadline
}

// checkNotPastStore fails if the client believes l is held later than the
// fake store keeps it.
func checkNotPastStore(t *testing.T, d *fakeDriver, l *Lease) {
	t.Helper()
	store := storeExpiry(d, l.Name())
	exp, _ := clientExpiry(l)
	if exp.After(store) {
		t.Errorf("client expiry %v after the store's: the client believes it holds the lock %v longer than the store keeps it",
			time.Until(exp).Round(time.Millisecond), exp.Sub(store).Round(time.Millisecond))
	}
	if left, inStore := l.TimeLeft(), time.Until(store); left > inStore {
		t.Errorf("TimeLeft %v > %v left in the store", left, inStore)
	}
}

// An Extend to a shorter TTL that overlaps a watchdog renewal, with the
// store applying the renewal first and the Extend last (so the store keeps
// the short expiry) but the client hearing the Extend's answer first: the
// renewal's late answer must not move the client's expiry past the store's.
func TestExtendShorterThenOverlappingRenewal(t *testing.T) {
	const ttl = 3 * time.Second
	const short = 400 * time.Millisecond
	d := newFake()
	inFlight, answer := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.renew = func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		res := storeRenew(d, batch) // applied in the store now
		if batch[0].TTL == ttl {    // the watchdog's: answer late, once
			first := false
			once.Do(func() { first = true })
			if first {
				close(inFlight)
				select {
				case <-answer:
				case <-ctx.Done():
					t.Error("the watchdog renewal's ctx ended before the test let it answer")
				}
			}
		}
		return res
	}
	c := New(d, "fake")
	defer c.Close()
	l, err := c.Mutex("extend/overlap", WithTTL(ttl)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	<-inFlight // the renewal is applied in the store and its answer held back
	if err := l.Extend(t.Context(), short); err != nil {
		t.Fatal(err)
	}
	checkNotPastStore(t, d, l)
	close(answer)
	for { // wait until the renewal's answer is recorded
		n := c.e.Sched().State(l.hold().Entry()).Renewals
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	checkNotPastStore(t, d, l)
	_ = l.Unlock(t.Context())
}

// Two Extends of one lease (Lease methods are safe for concurrent use) that
// the store applies in the opposite order to the one in which the client
// hears their answers: the client must keep the earlier expiry.
func TestConcurrentExtendsOppositeOrder(t *testing.T) {
	const ttl = 2 * time.Second
	const long, short = 10 * time.Second, time.Second
	d := newFake()
	longApplied, answer := make(chan struct{}), make(chan struct{})
	d.renew = func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		switch batch[0].TTL {
		case long: // applied first, answered last
			res := storeRenew(d, batch)
			close(longApplied)
			<-answer
			return res
		case short:
			<-longApplied
			return storeRenew(d, batch)
		}
		return storeRenew(d, batch)
	}
	c := New(d, "fake")
	defer c.Close()
	l, err := c.Mutex("extend/twice", WithTTL(ttl), WithoutRenewal()).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Extend(t.Context(), long) }()
	if err := l.Extend(t.Context(), short); err != nil {
		t.Fatal(err)
	}
	close(answer)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkNotPastStore(t, d, l)
	_ = l.Unlock(t.Context())
}

// A Lock whose ctx carries a lease past its deadline (the scheduler has not
// run yet, as after a pause of the process) must not re-enter that dead
// hold: re-entry needs a live lease.
func TestNoReentryIntoHoldPastDeadline(t *testing.T) {
	d := newFake()
	c := New(d, "fake")
	defer c.Close()
	m := c.Mutex("reenter/dead", WithTTL(time.Hour))
	outer, err := m.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// as if the process had slept past the deadline
	c.e.Sched().SetDeadline(outer.hold().Entry(), time.Now().Add(-time.Millisecond))

	ctx, cancel := context.WithTimeout(ContextWithLease(t.Context(), outer), 300*time.Millisecond)
	defer cancel()
	inner, err := m.Lock(ctx)
	if err == nil {
		defer inner.Unlock(t.Context())
		if inner.hold() == outer.hold() {
			t.Fatalf("Lock re-entered a hold past its deadline (inner Err now: %v)", inner.Err())
		}
	}
	if !errors.Is(outer.Err(), ErrLeaseLost) {
		t.Errorf("outer Err = %v; want ErrLeaseLost", outer.Err())
	}
}

// releaseGate wraps the fake so that Release calls wait at a gate: the
// test can hold a release back while other calls go on.
type releaseGate struct {
	*fakeDriver
	mu      sync.Mutex
	entered chan struct{} // closed at the first gated Release
	open    chan struct{} // gated Releases proceed when it is closed
}

func (g *releaseGate) Release(ctx context.Context, h driver.Held, n int) error {
	g.mu.Lock()
	select {
	case <-g.entered:
	default:
		close(g.entered)
	}
	g.mu.Unlock()
	<-g.open
	return g.fakeDriver.Release(ctx, h, n)
}

// A Lock by the same owner (WithOwner) while another goroutine's Unlock of
// that owner's last lease is on its way to the store: the store (which does
// not count holds) grants it as a re-entry of the hold being released, and
// the release then deletes it. The new lease must not be one the store no
// longer keeps: another client must not get the lock while it is live.
func TestSameOwnerLockDuringUnlock(t *testing.T) {
	d := newFake()
	g := &releaseGate{fakeDriver: d, entered: make(chan struct{}), open: make(chan struct{})}
	c := New(g, "fake")
	defer c.Close()
	other := New(d, "fake")
	defer other.Close()
	ctx := t.Context()
	m := c.Mutex("owner/race", WithOwner("worker-1"), WithTTL(10*time.Second))
	l1, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- l1.Unlock(ctx) }()
	<-g.entered // l1's release is on its way to the store

	got := make(chan *Lease, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l2, err := m.Lock(lctx)
		if err != nil {
			t.Errorf("second Lock: %v", err)
		}
		got <- l2
	}()
	var l2 *Lease
	select {
	case l2 = <-got: // granted while the release is still pending
	case <-time.After(300 * time.Millisecond): // waits for the release: fine
	}
	close(g.open)
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
	if l2 == nil {
		l2 = <-got
	}
	if l2 == nil {
		return
	}
	defer l2.Unlock(ctx)
	if l2.Err() != nil {
		return // it knows it lost the lock: no harm
	}
	if o, err := other.Mutex("owner/race").TryLock(ctx); err == nil {
		_ = o.Unlock(ctx)
		t.Fatalf("another client got the lock while the same owner's new lease (token %d) is live", l2.Token())
	}
	checkNotPastStore(t, d, l2)
}

// Unlock of a lease whose loss is being signalled (the Lost hook is
// running) must report the loss, not success: the caller must learn that
// its critical section may have overlapped another holder's.
func TestUnlockDuringLossReportsIt(t *testing.T) {
	d := newFake()
	inHook, leave := make(chan struct{}), make(chan struct{})
	c := New(d, "fake", WithHooks(Hooks{Lost: func(context.Context, Event) {
		close(inHook)
		<-leave
	}}))
	defer c.Close()
	l, err := c.Mutex("unlock/lost", WithTTL(time.Hour)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	go c.e.Lost(l.hold(), errors.Join(ErrLeaseLost, errors.New("store says another owner has it")))
	<-inHook
	errc := make(chan error, 1)
	go func() { errc <- l.Unlock(t.Context()) }()
	var uerr error
	select {
	case uerr = <-errc:
		close(leave)
	case <-time.After(300 * time.Millisecond): // Unlock waits for the loss: fine
		close(leave)
		uerr = <-errc
	}
	if !errors.Is(uerr, ErrLeaseLost) {
		t.Errorf("Unlock during loss = %v; want ErrLeaseLost", uerr)
	}
	if !errors.Is(l.Err(), ErrLeaseLost) {
		t.Errorf("Err after loss and Unlock = %v; want ErrLeaseLost", l.Err())
	}
}

// An Extend to a shorter TTL whose answer is lost (the store applied it, the
// connection then failed) is uncertain: the store may keep the short expiry,
// so the client must not go on believing in the longer one.
func TestUncertainShorterExtend(t *testing.T) {
	const ttl = 10 * time.Second
	const short = time.Second
	d := newFake()
	d.renew = func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		res := storeRenew(d, batch)
		if batch[0].TTL == short { // applied, but the answer is lost
			res[0].Err = errFakeCut
		}
		return res
	}
	c := New(d, "fake")
	defer c.Close()
	l, err := c.Mutex("extend/uncertain", WithTTL(ttl), WithoutRenewal()).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(t.Context(), short); !errors.Is(err, errFakeCut) {
		t.Fatalf("Extend = %v; want the store's error", err)
	}
	checkNotPastStore(t, d, l)
	_ = l.Unlock(t.Context())
}

// Unlock racing a loss, in either order: the caller learns of the loss
// exactly when it was declared (the Lost hook ran): Unlock then returns an
// error wrapping ErrLeaseLost, and Err says so afterwards.
func TestUnlockRacingLoss(t *testing.T) {
	var lostCalls sync.Map
	d := newFake()
	c := New(d, "fake", WithLogger(slog.New(slog.DiscardHandler)),
		WithHooks(Hooks{Lost: func(_ context.Context, e Event) { lostCalls.Store(e.Token, true) }}))
	defer c.Close()
	ctx := t.Context()
	m := c.Mutex("unlock/race", WithTTL(time.Hour))
	declared, reported := 0, 0
	for i := range 500 {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c.e.Lost(l.hold(), errors.Join(ErrLeaseLost, errors.New("store says another owner has it")))
		}()
		close(start)
		uerr := l.Unlock(ctx)
		wg.Wait()
		_, wasLost := lostCalls.Load(l.Token())
		if wasLost {
			declared++
		}
		if errors.Is(uerr, ErrLeaseLost) {
			reported++
		}
		if wasLost != errors.Is(uerr, ErrLeaseLost) {
			t.Fatalf("round %d: loss declared %v, Unlock = %v", i, wasLost, uerr)
		}
		if wasLost != errors.Is(l.Err(), ErrLeaseLost) {
			t.Fatalf("round %d: loss declared %v, Err after Unlock = %v", i, wasLost, l.Err())
		}
		// The lost hold's best-effort release may still be under way: let it end.
		c.e.WaitCleanup()
	}
	t.Logf("%d of 500 rounds declared lost, %d reported by Unlock", declared, reported)
}

// A write in flight that may shorten the store's expiry must lower the
// client's belief when it is sent, not when (or if) it is answered: the
// store may apply it at once and the answer never come back in time.

// An Extend to a shorter TTL whose answer is held up after the store
// applied it: once the store's (new) expiry has passed, the lease must read
// as lost, whatever the Extend call is still doing.
func TestShorterExtendInFlight(t *testing.T) {
	const ttl = 10 * time.Second
	const short = 300 * time.Millisecond
	d := newFake()
	applied, answer := make(chan struct{}), make(chan struct{})
	d.renew = func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		res := storeRenew(d, batch)
		if batch[0].TTL == short {
			close(applied)
			<-answer // a half-open connection: ignores ctx
		}
		return res
	}
	c := New(d, "fake", WithLogger(slog.New(slog.DiscardHandler)))
	defer c.Close()
	defer close(answer) // before Close
	l, err := c.Mutex("extend/inflight", WithTTL(ttl), WithoutRenewal()).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = l.Extend(t.Context(), short) }()
	<-applied
	time.Sleep(time.Until(storeExpiry(d, l.Name())) + 10*time.Millisecond)
	if err := l.Err(); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Err = %v after the store's expiry, with the shortening Extend unanswered; want ErrLeaseLost (TimeLeft %v)", err, l.TimeLeft())
	}
}

// A renewing lease extended by a longer TTL: its next watchdog renewal
// brings the store's expiry back to the lease's own TTL. If that renewal is
// applied and its answer held up, the lease must read as lost once the
// store's expiry has passed, not at the long Extend's deadline.
func TestWatchdogRenewalAfterLongerExtendInFlight(t *testing.T) {
	const ttl = 600 * time.Millisecond
	const long = 30 * time.Second
	d := newFake()
	applied, answer := make(chan struct{}), make(chan struct{})
	extendedCh := make(chan struct{})
	d.renew = func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		select {
		case <-extendedCh:
		default:
			return storeRenew(d, batch) // before the Extend: renew normally
		}
		res := storeRenew(d, batch)
		if batch[0].TTL == ttl {
			select {
			case <-applied:
			default:
				close(applied)
			}
			<-answer
		}
		return res
	}
	c := New(d, "fake", WithLogger(slog.New(slog.DiscardHandler)))
	defer c.Close()
	defer close(answer)
	l, err := c.Mutex("extend/longer", WithTTL(ttl)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	close(extendedCh)
	if err := l.Extend(t.Context(), long); err != nil {
		t.Fatal(err)
	}
	<-applied // the watchdog's renewal set the store's expiry back to ttl
	time.Sleep(time.Until(storeExpiry(d, l.Name())) + 10*time.Millisecond)
	if err := l.Err(); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Err = %v after the store's expiry, with the watchdog renewal unanswered; want ErrLeaseLost (TimeLeft %v)", err, l.TimeLeft())
	}
}
