package drivertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// DriverHarness is a Harness that gives the suite its clients' drivers, for
// the driver-level tests of read-write locks and semaphores (section
// DriverKinds): the backends whose kinds keep a queue in the store (etcd,
// ZooKeeper, Redis) implement it, from their package's export_test.go.
type DriverHarness interface {
	Harness
	// Driver returns c's driver; c is a client from NewClient.
	Driver(c *dlock.Client) driver.Driver
}

// driverKinds runs the driver-level section: read-write locks and
// semaphores asked of the driver itself, and two clients' cancelled waits.
func (s *suite) driverKinds(t *testing.T, h DriverHarness) {
	open := func(t *testing.T) (*dlock.Client, driver.Driver) {
		t.Helper()
		c := s.client(t)
		return c, h.Driver(c)
	}
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"RWLock", func(t *testing.T) { driverRWLock(t, open) }},
		{"Semaphore", func(t *testing.T) { driverSemaphore(t, open) }},
		{"SemaphoreLaterHolderReleases", func(t *testing.T) { driverSemaphoreLaterHolderReleases(t, open) }},
		{"SemaphoreContention", func(t *testing.T) { driverSemaphoreContention(t, open) }},
		{"CancelledPermitWaiters", func(t *testing.T) { cancelledPermitWaiters(t, s.client(t), s.client(t)) }},
		{"CancelledWriterFreesReaders", func(t *testing.T) { cancelledWriterFreesReaders(t, s.client(t), s.client(t)) }},
	} {
		t.Run(tc.name, tc.fn)
	}
}

// openDriver opens a client and returns it with its driver.
type openDriver func(t *testing.T) (*dlock.Client, driver.Driver)

// Hold is a driver-level grant: the request and what the driver answered.
type Hold struct {
	D driver.Driver
	R driver.Request
	G driver.Grant
}

// AcquireHold asks d for a hold of kind on name (limit permits for a Permit),
// waiting if wait, and returns it, or nil when refused.
func AcquireHold(t *testing.T, d driver.Driver, name string, kind driver.Kind, limit int, wait bool) *Hold {
	t.Helper()
	r := driver.Request{Name: name, Owner: dlock.NewOwnerID(), TTL: 10 * time.Second, Kind: kind, Limit: limit, Label: "test", Wait: wait}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	g, err := d.Acquire(ctx, r)
	if err != nil {
		t.Fatalf("acquire %v of %q: %v", kind, name, err)
	}
	if !g.Acquired {
		return nil
	}
	return &Hold{D: d, R: r, G: g}
}

// MustHold takes a hold without waiting, or fails the test.
func MustHold(t *testing.T, d driver.Driver, name string, kind driver.Kind, limit int) *Hold {
	t.Helper()
	h := AcquireHold(t, d, name, kind, limit, false)
	if h == nil {
		t.Fatalf("try %v of %q: not acquired", kind, name)
	}
	return h
}

// WantRefused fails the test unless a try of kind on name is refused.
func WantRefused(t *testing.T, d driver.Driver, name string, kind driver.Kind, limit int) {
	t.Helper()
	if h := AcquireHold(t, d, name, kind, limit, false); h != nil {
		h.Release(t)
		t.Fatalf("try %v of %q: acquired; want refused", kind, name)
	}
}

// Release gives the hold up, or fails the test.
func (h *Hold) Release(t *testing.T) {
	t.Helper()
	held := driver.Held{Name: h.R.Name, Owner: h.R.Owner, TTL: h.R.TTL, Kind: h.R.Kind, Token: h.G.Token, Handle: h.G.Handle}
	if err := h.D.Release(t.Context(), held, 1); err != nil {
		t.Fatalf("release %v of %q: %v", h.R.Kind, h.R.Name, err)
	}
}

// WaitHold starts a waiting acquire and returns the channel its hold
// arrives on.
func WaitHold(t *testing.T, d driver.Driver, name string, kind driver.Kind, limit int) <-chan *Hold {
	ch := make(chan *Hold, 1)
	go func() {
		r := driver.Request{Name: name, Owner: dlock.NewOwnerID(), TTL: 10 * time.Second, Kind: kind, Limit: limit, Label: "test", Wait: true}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		g, err := d.Acquire(ctx, r)
		if err != nil || !g.Acquired {
			t.Errorf("waiting acquire %v of %q: %v, %v", kind, name, g.Acquired, err)
			close(ch)
			return
		}
		ch <- &Hold{D: d, R: r, G: g}
	}()
	return ch
}

// WantNotYet fails the test if the hold on ch (from WaitHold) arrives within
// 300ms.
func WantNotYet(t *testing.T, ch <-chan *Hold, what string) {
	t.Helper()
	select {
	case h := <-ch:
		if h != nil {
			h.Release(t)
		}
		t.Fatalf("%s was granted too soon", what)
	case <-time.After(300 * time.Millisecond):
	}
}

// WantGranted returns the hold on ch (from WaitHold), or fails the test if it does
// not come within 15s.
func WantGranted(t *testing.T, ch <-chan *Hold, what string) *Hold {
	t.Helper()
	select {
	case h := <-ch:
		if h == nil {
			t.Fatalf("%s failed", what)
		}
		return h
	case <-time.After(15 * time.Second):
		t.Fatalf("%s was not granted", what)
	}
	return nil
}

// driverRWLock: readers hold together, a writer waits for them and keeps later
// readers out while it waits, and its token exceeds every earlier grant's.
func driverRWLock(t *testing.T, open openDriver) {
	_, d1 := open(t)
	_, d2 := open(t)
	name := lockName(t)

	r1 := MustHold(t, d1, name, driver.Shared, 0)
	r2 := MustHold(t, d2, name, driver.Shared, 0) // two readers at once
	WantRefused(t, d2, name, driver.Write, 0)
	w := WaitHold(t, d2, name, driver.Write, 0)
	WantNotYet(t, w, "a writer while readers hold")
	// The queued writer keeps a new reader out.
	for end := time.Now().Add(5 * time.Second); ; {
		h := AcquireHold(t, d1, name, driver.Shared, 0, false)
		if h == nil {
			break
		}
		h.Release(t) // the writer's node may not be there yet
		if time.Now().After(end) {
			t.Fatal("a reader was granted while a writer waited")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r3 := WaitHold(t, d1, name, driver.Shared, 0)
	r1.Release(t)
	WantNotYet(t, w, "a writer while a reader holds")
	r2.Release(t)
	wh := WantGranted(t, w, "the writer")
	if wh.G.Token <= r1.G.Token || wh.G.Token <= r2.G.Token {
		t.Errorf("write token %d not above the read tokens %d, %d", wh.G.Token, r1.G.Token, r2.G.Token)
	}
	WantNotYet(t, r3, "a reader while the writer holds")
	WantRefused(t, d1, name, driver.Write, 0)
	ki := d1.(driver.KindInspector)
	info, err := ki.InspectKind(t.Context(), name, driver.Shared)
	if err != nil || !info.Held || info.Kind != driver.Write || len(info.Holders) != 1 || info.Token != wh.G.Token || info.Label != "test" || info.Waiters != 1 {
		t.Fatalf("InspectKind while the writer holds = %+v, %v", info, err)
	}
	wh.Release(t)
	rh := WantGranted(t, r3, "the reader after the writer")
	if rh.G.Token <= wh.G.Token {
		t.Errorf("read token %d not above the write token %d", rh.G.Token, wh.G.Token)
	}
	rh.Release(t)
	// The mutex of the same name is another lock.
	l, err := d1.Acquire(t.Context(), driver.Request{Name: name, Owner: "m", TTL: 10 * time.Second, Kind: driver.Exclusive})
	if err != nil || !l.Acquired {
		t.Fatalf("mutex of the read-write lock's name: %v, %v", l.Acquired, err)
	}
	wh2 := MustHold(t, d2, name, driver.Write, 0)
	wh2.Release(t)
}

// driverSemaphore: a semaphore never grants more than its limit, wakes a waiter on a
// release, refuses another limit while it has holders, takes a new one
// when it has none, and frees the permits of a client that dies.
func driverSemaphore(t *testing.T, open openDriver) {
	_, d1 := open(t)
	c2, d2 := open(t)
	name := lockName(t)

	p1 := MustHold(t, d1, name, driver.Permit, 2)
	p2 := MustHold(t, d2, name, driver.Permit, 2)
	if p2.G.Token <= p1.G.Token {
		t.Errorf("tokens %d then %d", p1.G.Token, p2.G.Token)
	}
	WantRefused(t, d1, name, driver.Permit, 2)
	_, err := d1.Acquire(t.Context(), driver.Request{Name: name, Owner: "x", TTL: 10 * time.Second, Kind: driver.Permit, Limit: 3})
	if !errors.Is(err, dlock.ErrLimitMismatch) {
		t.Fatalf("acquire with another limit while held: %v; want ErrLimitMismatch", err)
	}
	ki := d1.(driver.KindInspector)
	info, err := ki.InspectKind(t.Context(), name, driver.Permit)
	if err != nil || !info.Held || info.Limit != 2 || len(info.Holders) != 2 || info.Token != p2.G.Token {
		t.Fatalf("InspectKind = %+v, %v", info, err)
	}
	w := WaitHold(t, d1, name, driver.Permit, 2)
	WantNotYet(t, w, "a third permit")
	p1.Release(t)
	p3 := WantGranted(t, w, "the waiting permit")
	if p3.G.Token <= p2.G.Token {
		t.Errorf("token %d after %d", p3.G.Token, p2.G.Token)
	}
	// A client that dies frees its permit: its session ends with it.
	w2 := WaitHold(t, d1, name, driver.Permit, 2)
	WantNotYet(t, w2, "a permit while two are held")
	c2.Close()
	p4 := WantGranted(t, w2, "the permit freed by a closed client")
	p3.Release(t)
	p4.Release(t)
	// No holders: a new limit replaces the old.
	var hs []*Hold
	for range 3 {
		hs = append(hs, MustHold(t, d1, name, driver.Permit, 3))
	}
	WantRefused(t, d1, name, driver.Permit, 3)
	for _, h := range hs {
		h.Release(t)
	}
}

// driverSemaphoreLaterHolderReleases: a waiter gets the permit of whichever holder
// releases first, not only the oldest's.
func driverSemaphoreLaterHolderReleases(t *testing.T, open openDriver) {
	_, d := open(t)
	name := lockName(t)
	a := MustHold(t, d, name, driver.Permit, 2)
	b := MustHold(t, d, name, driver.Permit, 2)
	w := WaitHold(t, d, name, driver.Permit, 2)
	WantNotYet(t, w, "a third permit")
	b.Release(t)
	WantGranted(t, w, "the permit freed by the later holder").Release(t)
	a.Release(t)
}

// driverSemaphoreContention: under contention by 8 holders over 2 clients, never
// more than the limit hold at once, and every contender gets its permit.
func driverSemaphoreContention(t *testing.T, open openDriver) {
	_, d1 := open(t)
	_, d2 := open(t)
	name := lockName(t)
	const limit = 3
	var (
		mu       sync.Mutex
		in, most int
		wg       sync.WaitGroup
	)
	for i := range 8 {
		d := d1
		if i%2 == 1 {
			d = d2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				ch := WaitHold(t, d, name, driver.Permit, limit)
				hd := <-ch
				if hd == nil {
					return
				}
				mu.Lock()
				in++
				most = max(most, in)
				mu.Unlock()
				time.Sleep(50 * time.Millisecond) // long enough to overlap the next grants
				mu.Lock()
				in--
				mu.Unlock()
				hd.Release(t)
			}
		}()
	}
	wg.Wait()
	if most > limit {
		t.Fatalf("%d permits held at once; the limit is %d", most, limit)
	}
	if most < 2 {
		t.Errorf("at most %d permit held at once: no concurrency seen", most)
	}
}

// cancelledPermitWaiters: cancelled permit waiters must leave nothing
// behind: with one permit, a holder, and waiters whose ctx ends while they
// wait, the permit is free again for a try once the holder unlocks.
func cancelledPermitWaiters(t *testing.T, a, b *dlock.Client) {
	ctx, name := t.Context(), lockName(t)
	h, err := a.Semaphore(name, 1).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(300+200*i)*time.Millisecond)
		if l, err := b.Semaphore(name, 1).Acquire(wctx); err == nil {
			cancel()
			t.Fatalf("second permit of one granted (token %d)", l.Token())
		}
		cancel()
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := b.Semaphore(name, 1).TryAcquire(ctx)
		if err == nil {
			_ = l.Unlock(ctx)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("permit not free after the holder left and the waiters gave up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cancelledWriterFreesReaders: a writer that gives up waiting must not keep
// later readers out: once its ctx ends, a new reader gets in beside the
// reader that held all along.
func cancelledWriterFreesReaders(t *testing.T, a, b *dlock.Client) {
	ctx, name := t.Context(), lockName(t)
	r, err := a.RWMutex(name).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock(ctx)
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if w, err := b.RWMutex(name).Lock(wctx); err == nil {
		cancel()
		t.Fatalf("writer granted beside a reader (token %d)", w.Token())
	}
	cancel()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r2, err := b.RWMutex(name).RLock(rctx)
	if err != nil {
		t.Fatalf("reader kept out by a writer that gave up: %v", err)
	}
	_ = r2.Unlock(ctx)
}
