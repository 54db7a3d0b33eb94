package dlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"go.uber.org/goleak"
)

// Regression tests from the adversarial pass that held on the code they
// were written against: each checks one of the documented guarantees under
// a schedule chosen to break it.

func quiet() ClientOption { return WithLogger(slog.New(slog.DiscardHandler)) }

// A renewal the store confirms just after the lease's deadline counts for
// nothing: the lease is lost at its deadline and stays lost.
func TestRenewalConfirmedAfterDeadline(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const ttl = 300 * time.Millisecond
	d := newFake()
	var l *Lease
	var once sync.Once
	answered := make(chan struct{})
	d.renew = func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		res := storeRenew(d, batch) // applied in the store
		first := false
		once.Do(func() { first = true })
		if first {
			_, deadline := clientExpiry(l)
			time.Sleep(time.Until(deadline) + 20*time.Millisecond) // answer late, ignoring ctx
			defer close(answered)
		}
		return res
	}
	c := New(d, "fake", quiet())
	defer c.Close()
	var err error
	l, err = c.Mutex("late/renewal", WithTTL(ttl)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * ttl):
		t.Fatal("not declared lost while its renewal was unanswered past the deadline")
	}
	<-answered
	time.Sleep(20 * time.Millisecond) // let the late answer be recorded
	if !errors.Is(l.Err(), ErrLeaseLost) || l.TimeLeft() != 0 {
		t.Fatalf("after a late confirmation: Err = %v, TimeLeft = %v; want lost, 0", l.Err(), l.TimeLeft())
	}
	if err := l.Extend(t.Context(), ttl); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Extend of the lost lease = %v; want ErrLeaseLost", err)
	}
}

// Unlock while a renewal of the lease is in flight: the renewal's answer,
// whatever it is, does not bring the lease back, nor schedule it again.
func TestUnlockRacingRenewal(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const ttl = 300 * time.Millisecond
	for _, renewErr := range []error{nil, errFakeCut, driver.ErrLeaseLost} {
		t.Run(fmt.Sprint(renewErr), func(t *testing.T) {
			d := newFake()
			inFlight, answer := make(chan struct{}), make(chan struct{})
			var once sync.Once
			d.renew = func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
				res := make([]driver.RenewResult, len(batch))
				once.Do(func() {
					close(inFlight)
					<-answer
					res[0].Err = renewErr
				})
				return res
			}
			var lost atomic.Int32
			c := New(d, "fake", quiet(), WithHooks(Hooks{Lost: func(context.Context, Event) { lost.Add(1) }}))
			defer c.Close()
			l, err := c.Mutex("unlock/renewing", WithTTL(ttl)).Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			<-inFlight
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			close(answer)
			c.e.Sched().WaitRenewals()
			if l.Err() != nil || l.TimeLeft() != 0 || lost.Load() != 0 {
				t.Errorf("after Unlock and the renewal's answer: Err = %v, TimeLeft = %v, Lost hook calls %d",
					l.Err(), l.TimeLeft(), lost.Load())
			}
			n := c.e.Sched().Len()
			if n != 0 {
				t.Errorf("%d holds still scheduled after Unlock", n)
			}
		})
	}
}

// Extend of a lease that is lost while the Extend is in flight (its answer
// comes after the deadline): it reports the loss, and the lease stays lost.
func TestExtendRacingLoss(t *testing.T) {
	const ttl = 300 * time.Millisecond
	d := newFake()
	var l *Lease
	d.renew = func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		res := storeRenew(d, batch)
		_, deadline := clientExpiry(l)
		time.Sleep(time.Until(deadline) + 20*time.Millisecond)
		return res
	}
	c := New(d, "fake", quiet())
	defer c.Close()
	var err error
	l, err = c.Mutex("extend/losing", WithTTL(ttl), WithoutRenewal()).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(t.Context(), 10*time.Second); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Extend answered after the deadline = %v; want ErrLeaseLost", err)
	}
	if !errors.Is(l.Err(), ErrLeaseLost) || l.TimeLeft() != 0 {
		t.Errorf("after: Err = %v, TimeLeft = %v; want lost, 0", l.Err(), l.TimeLeft())
	}
}

// A Lost hook that reads the lease (Err, Done, TimeLeft, Unlock) neither
// deadlocks nor sees it live.
func TestLostHookReadsLease(t *testing.T) {
	d := newFake()
	var mu sync.Mutex
	leases := map[string]*Lease{}
	seen := make(chan string, 1)
	c := New(d, "fake", quiet(), WithHooks(Hooks{Lost: func(_ context.Context, e Event) {
		mu.Lock()
		l := leases[e.Name]
		mu.Unlock()
		_ = l.Done()
		seen <- fmt.Sprintf("Err lost %v, TimeLeft %v, Unlock lost %v",
			errors.Is(l.Err(), ErrLeaseLost), l.TimeLeft(), errors.Is(l.Unlock(context.Background()), ErrLeaseLost))
	}}))
	defer c.Close()
	l, err := c.Mutex("hook/reads", WithTTL(200*time.Millisecond), WithoutRenewal()).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	leases[l.Name()] = l
	mu.Unlock()
	select {
	case got := <-seen:
		if want := "Err lost true, TimeLeft 0s, Unlock lost true"; got != want {
			t.Errorf("in the Lost hook: %s; want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lost hook not called, or deadlocked")
	}
	<-l.Done()
}

// A lease read after Unlock: Err nil, Done closed, TimeLeft 0; Unlock and
// Extend again say ErrNotHeld; a ctx carrying it re-enters nothing.
func TestLeaseAfterUnlock(t *testing.T) {
	d := newFake()
	c := New(d, "fake", quiet())
	defer c.Close()
	ctx := t.Context()
	m := c.Mutex("after/unlock", WithTTL(time.Minute))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done open after Unlock")
	}
	if l.Err() != nil || l.TimeLeft() != 0 {
		t.Errorf("after Unlock: Err = %v, TimeLeft = %v", l.Err(), l.TimeLeft())
	}
	if err := l.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("second Unlock = %v; want ErrNotHeld", err)
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Extend after Unlock = %v; want ErrNotHeld", err)
	}
	other, err := m.Lock(ctx) // someone else's now
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unlock(ctx)
	if l2, err := m.TryLock(ContextWithLease(ctx, l)); err == nil {
		t.Fatalf("a ctx carrying an unlocked lease got the lock held by another (token %d)", l2.Token())
	} else if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("TryLock = %v; want ErrNotAcquired", err)
	}
}

// A ctx carrying a live lease of another client, or of another lock name,
// re-enters nothing: the Lock is a holder of its own.
func TestContextWithForeignLease(t *testing.T) {
	d := newFake()
	a, b := New(d, "fake", quiet()), New(d, "fake", quiet())
	defer a.Close()
	defer b.Close()
	ctx := t.Context()
	la, err := a.Mutex("foreign").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Unlock(ctx)
	if l, err := b.Mutex("foreign").TryLock(ContextWithLease(ctx, la)); err == nil {
		t.Fatalf("client b re-entered client a's lease (token %d)", l.Token())
	} else if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("TryLock = %v; want ErrNotAcquired", err)
	}
	lx, err := a.Mutex("other-name").Lock(ContextWithLease(ctx, la))
	if err != nil {
		t.Fatal(err)
	}
	defer lx.Unlock(ctx)
	if lx.Owner() == la.Owner() {
		t.Errorf("a lease of another name passed on its owner id")
	}
}

// Goroutines sharing one Mutex, with TryLock, Lock, Do and nested re-entry
// mixed, over a store whose renewals are slow and sometimes fail: at most
// one holder at a time, counted by a critical section that checks the
// lease is live at both ends.
func TestSharedMutexExclusion(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := newFake()
	base := d
	d.renew = func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		select { // slow renewals, within the batch's deadline
		case <-time.After(time.Duration(rand.N(30)) * time.Millisecond):
		case <-ctx.Done():
		}
		if rand.N(5) == 0 {
			res := make([]driver.RenewResult, len(batch))
			for i := range res {
				res[i].Err = errFakeCut
			}
			return res
		}
		return storeRenew(base, batch)
	}
	c := New(d, "fake", quiet())
	m := c.Mutex("shared", WithTTL(200*time.Millisecond))
	var inside atomic.Int32
	var most, done atomic.Int32
	work := func(ctx context.Context, l *Lease) {
		for n := inside.Add(1); ; {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(time.Duration(rand.N(3)) * time.Millisecond)
		if rand.N(4) == 0 { // nested re-entry through the ctx
			if l2, err := m.Lock(ContextWithLease(ctx, l)); err == nil {
				if l2.Token() != l.Token() {
					t.Errorf("nested Lock got token %d, not the outer %d", l2.Token(), l.Token())
				}
				_ = l2.Unlock(ctx)
			}
		}
		inside.Add(-1)
		done.Add(1)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				switch g % 3 {
				case 0:
					l, err := m.TryLock(ctx)
					if err != nil {
						if !errors.Is(err, ErrNotAcquired) {
							t.Errorf("TryLock: %v", err)
						}
						continue
					}
					work(ctx, l)
					_ = l.Unlock(ctx)
				case 1:
					l, err := m.Lock(ctx)
					if err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					work(ctx, l)
					_ = l.Unlock(ctx)
				case 2:
					_ = Do(ctx, m, func(ctx context.Context, l *Lease) error { work(ctx, l); return nil })
				}
			}
		}()
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	if most.Load() > 1 {
		t.Errorf("%d holders of one Mutex at once", most.Load())
	}
	t.Logf("%d critical sections", done.Load())
}

// Close while a Lock waits for another owner, and while a stale grant is
// being released: both return ErrClosed (or, for the stale one,
// ErrNotAcquired), never a lease, and nothing is left running.
func TestCloseDuringWaitAndStaleRelease(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const ttl = 2 * time.Second
	d := newFake()
	var calls atomic.Int32
	releasing, closed := make(chan struct{}), make(chan struct{})
	d.acquire = func(ctx context.Context, req driver.Request) (driver.Grant, error) {
		if req.Name == "stale" && calls.Add(1) == 1 {
			return driver.Grant{Acquired: true, Token: 1, Since: time.Now().Add(-ttl)}, nil
		}
		return driver.Grant{Retry: time.Hour}, nil // held by another owner
	}
	g := &staleGate{fakeDriver: d, releasing: releasing, closed: closed}
	c := New(g, "fake", quiet())
	errs := make(chan error, 2)
	for _, name := range []string{"waits", "stale"} {
		go func() {
			l, err := c.Mutex(name, WithTTL(ttl)).Lock(context.Background())
			if l != nil {
				err = fmt.Errorf("%s: got a lease (token %d) across Close", name, l.Token())
			}
			errs <- err
		}()
	}
	<-releasing // the stale grant's release has begun
	for d.acquires.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	closeErr := make(chan error, 1)
	go func() { closeErr <- c.Close() }()
	time.Sleep(50 * time.Millisecond) // let Close begin before the release returns
	close(closed)
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotAcquired) {
			t.Errorf("Lock across Close: %v; want ErrClosed", err)
		}
	}
	if err := <-closeErr; err != nil {
		t.Error(err)
	}
}

// staleGate holds the release of the stale grant (token 1 of "stale") until
// closed is closed.
type staleGate struct {
	*fakeDriver
	releasing, closed chan struct{}
	once              sync.Once
}

func (g *staleGate) Release(ctx context.Context, h driver.Held, n int) error {
	if h.Name == "stale" && h.Token == 1 {
		g.once.Do(func() { close(g.releasing) })
		<-g.closed
	}
	return g.fakeDriver.Release(ctx, h, n)
}

// Close with renewals in flight cancels their ctx and waits for them, and
// leaves no goroutine behind, with leases held, lost and waited for.
func TestCloseCancelsRenewalsNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := newFake()
	inFlight := make(chan struct{})
	var once sync.Once
	var returned atomic.Bool
	d.renew = func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		once.Do(func() { close(inFlight) })
		<-ctx.Done() // a store that answers only when given up on
		returned.Store(true)
		res := make([]driver.RenewResult, len(batch))
		for i := range res {
			res[i].Err = ctx.Err()
		}
		return res
	}
	c := New(d, "fake", quiet())
	ctx := t.Context()
	for i := range 20 {
		if _, err := c.Mutex(fmt.Sprint("held/", i), WithTTL(3*time.Second)).Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	short, err := c.Mutex("fixed", WithTTL(50*time.Millisecond), WithoutRenewal()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-short.Done() // lost, its best-effort release under way
	waitErr := make(chan error, 1)
	go func() { _, err := c.Mutex("held/0").Lock(ctx); waitErr <- err }()
	<-inFlight
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Error("Close returned before the renewal in flight did")
	}

	if err := <-waitErr; !errors.Is(err, ErrClosed) {
		t.Errorf("waiter across Close: %v; want ErrClosed", err)
	}
}

// Every way a Lock can give up when its ctx ends matches both
// ErrNotAcquired and ctx's error (ctx.Err(), also when the ctx has a
// cause): waiting on another owner (polling or in a blocking store), and
// waiting behind the same owner's acquisition in this client.
func TestGiveUpMatchesCtxErr(t *testing.T) {
	cause := errors.New("the caller's own reason")
	for _, path := range []string{"polling", "blocking", "same-owner"} {
		for _, withCause := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/cause=%v", path, withCause), func(t *testing.T) {
				d := newFake()
				d.caps.Blocking = path == "blocking"
				if d.caps.Blocking {
					d.acquire = func(ctx context.Context, req driver.Request) (driver.Grant, error) {
						if req.Owner == "holder" {
							return driver.Grant{Acquired: true, Token: 1}, nil
						}
						<-ctx.Done()
						return driver.Grant{}, ctx.Err()
					}
				}
				c := New(d, "fake", quiet())
				defer c.Close()
				ctx := t.Context()
				held, err := c.Mutex("giveup", WithOwner("holder")).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer held.Unlock(ctx)
				m := c.Mutex("giveup")
				if path == "same-owner" { // a first acquisition of this owner waits on "holder"
					m = c.Mutex("giveup", WithOwner("waiter"))
					bctx, cancel := context.WithCancel(ctx)
					defer cancel()
					go func() { _, _ = m.Lock(bctx) }()
					for {
						if c.e.TurnBlocked("giveup", "waiter", driver.Exclusive) {
							break
						}
						time.Sleep(time.Millisecond)
					}
				}
				var wctx context.Context
				var cancel context.CancelFunc
				if withCause {
					wctx, cancel = context.WithTimeoutCause(ctx, 50*time.Millisecond, cause)
				} else {
					wctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
				}
				defer cancel()
				l, err := m.Lock(wctx)
				if err == nil {
					t.Fatalf("got a lease (token %d) of a held lock", l.Token())
				}
				if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Lock = %v; want ErrNotAcquired and context.DeadlineExceeded", err)
				}
			})
		}
	}
}

// A Lost hook that closes the client ("on loss, shut down") must not
// deadlock, whether the loss was found by the scheduler's tick (a fixed
// lease's end) or by a renewal's answer (the store refused it).
func TestCloseInLostHook(t *testing.T) {
	for _, how := range []string{"tick", "renewal"} {
		t.Run(how, func(t *testing.T) {
			d := newFake()
			if how == "renewal" {
				d.renew = func(context.Context, []driver.Held) []driver.RenewResult {
					return []driver.RenewResult{{Err: driver.ErrLeaseLost}}
				}
			}
			var c *Client
			closed := make(chan error, 1)
			c = New(d, "fake", quiet(), WithHooks(Hooks{Lost: func(context.Context, Event) {
				closed <- c.Close()
			}}))
			opts := []Option{WithTTL(150 * time.Millisecond)}
			if how == "tick" {
				opts = append(opts, WithoutRenewal())
			}
			l, err := c.Mutex("close/in/hook", opts...).Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("Close in the Lost hook: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close in a Lost hook deadlocked")
			}
			<-l.Done()
			if !errors.Is(l.Err(), ErrLeaseLost) {
				t.Errorf("Err = %v; want ErrLeaseLost", l.Err())
			}
		})
	}
}

// Close wakes a Lock waiting inside a blocking store's Acquire (bound to
// Close by the engine's set of waits, see core's bindClose) and one
// waiting behind it for the same owner's turn, with ErrClosed.
func TestCloseWakesBlockingWaits(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := newFake()
	d.caps.Blocking = true
	d.acquire = func(ctx context.Context, req driver.Request) (driver.Grant, error) {
		if req.Owner == "holder" {
			return driver.Grant{Acquired: true, Token: 1}, nil
		}
		<-ctx.Done() // queued in the store until given up on
		return driver.Grant{}, ctx.Err()
	}
	c := New(d, "fake", quiet())
	ctx := t.Context()
	if _, err := c.Mutex("blocked", WithOwner("holder")).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 { // the second waits for the first's turn
		go func() {
			_, err := c.Mutex("blocked", WithOwner("waiter")).Lock(ctx)
			errs <- err
		}()
	}
	for !c.e.TurnBlocked("blocked", "waiter", driver.Exclusive) || d.acquires.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Errorf("a waiter across Close: %v; want ErrClosed", err)
		}
	}
}
