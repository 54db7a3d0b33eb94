package etcdlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/testserver"
)

// kindsClient opens a client of the harness and returns its driver.
func kindsClient(t *testing.T, h *harness) (*dlock.Client, driver.Driver) {
	t.Helper()
	c, err := h.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, etcdlock.DriverOf(c)
}

// hold is a driver-level grant, for the kinds' tests.
type hold struct {
	d driver.Driver
	r driver.Request
	g driver.Grant
}

func acquireKind(t *testing.T, d driver.Driver, name string, kind driver.Kind, limit int, wait bool) *hold {
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
	return &hold{d: d, r: r, g: g}
}

func mustKind(t *testing.T, d driver.Driver, name string, kind driver.Kind, limit int) *hold {
	t.Helper()
	h := acquireKind(t, d, name, kind, limit, false)
	if h == nil {
		t.Fatalf("try %v of %q: not acquired", kind, name)
	}
	return h
}

func refused(t *testing.T, d driver.Driver, name string, kind driver.Kind, limit int) {
	t.Helper()
	if h := acquireKind(t, d, name, kind, limit, false); h != nil {
		h.release(t)
		t.Fatalf("try %v of %q: acquired; want refused", kind, name)
	}
}

func (h *hold) release(t *testing.T) {
	t.Helper()
	held := driver.Held{Name: h.r.Name, Owner: h.r.Owner, TTL: h.r.TTL, Kind: h.r.Kind, Token: h.g.Token, Handle: h.g.Handle}
	if _, err := h.d.Release(t.Context(), held, 1); err != nil {
		t.Fatalf("release %v of %q: %v", h.r.Kind, h.r.Name, err)
	}
}

// waitKind starts a waiting acquire and returns the channel its hold
// arrives on.
func waitKind(t *testing.T, d driver.Driver, name string, kind driver.Kind, limit int) <-chan *hold {
	ch := make(chan *hold, 1)
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
		ch <- &hold{d: d, r: r, g: g}
	}()
	return ch
}

func notYet(t *testing.T, ch <-chan *hold, what string) {
	t.Helper()
	select {
	case h := <-ch:
		if h != nil {
			h.release(t)
		}
		t.Fatalf("%s was granted too soon", what)
	case <-time.After(300 * time.Millisecond):
	}
}

func granted(t *testing.T, ch <-chan *hold, what string) *hold {
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

// Readers hold together, a writer waits for them and keeps later readers
// out while it waits, and its token exceeds every earlier grant's.
func TestRWLockDriver(t *testing.T) {
	srv := testserver.Etcd(t)
	h := &harness{endpoints: []string{"http://" + srv.Addr()}}
	_, d1 := kindsClient(t, h)
	_, d2 := kindsClient(t, h)
	const name = "kinds/rw"

	r1 := mustKind(t, d1, name, driver.Shared, 0)
	r2 := mustKind(t, d2, name, driver.Shared, 0) // two readers at once
	refused(t, d2, name, driver.Write, 0)
	w := waitKind(t, d2, name, driver.Write, 0)
	notYet(t, w, "a writer while readers hold")
	// The queued writer keeps a new reader out.
	for end := time.Now().Add(5 * time.Second); ; {
		h := acquireKind(t, d1, name, driver.Shared, 0, false)
		if h == nil {
			break
		}
		h.release(t) // the writer's node may not be there yet
		if time.Now().After(end) {
			t.Fatal("a reader was granted while a writer waited")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r3 := waitKind(t, d1, name, driver.Shared, 0)
	r1.release(t)
	notYet(t, w, "a writer while a reader holds")
	r2.release(t)
	wh := granted(t, w, "the writer")
	if wh.g.Token <= r1.g.Token || wh.g.Token <= r2.g.Token {
		t.Errorf("write token %d not above the read tokens %d, %d", wh.g.Token, r1.g.Token, r2.g.Token)
	}
	notYet(t, r3, "a reader while the writer holds")
	refused(t, d1, name, driver.Write, 0)
	ki := d1.(driver.KindInspector)
	info, err := ki.InspectKind(t.Context(), name, driver.Shared)
	if err != nil || !info.Held || info.Kind != driver.Write || len(info.Holders) != 1 || info.Token != wh.g.Token || info.Label != "test" || info.Waiters != 1 {
		t.Fatalf("InspectKind while the writer holds = %+v, %v", info, err)
	}
	wh.release(t)
	rh := granted(t, r3, "the reader after the writer")
	if rh.g.Token <= wh.g.Token {
		t.Errorf("read token %d not above the write token %d", rh.g.Token, wh.g.Token)
	}
	rh.release(t)
	// The mutex of the same name is another lock.
	l, err := d1.Acquire(t.Context(), driver.Request{Name: name, Owner: "m", TTL: 10 * time.Second, Kind: driver.Exclusive})
	if err != nil || !l.Acquired {
		t.Fatalf("mutex of the read-write lock's name: %v, %v", l.Acquired, err)
	}
	wh2 := mustKind(t, d2, name, driver.Write, 0)
	wh2.release(t)
}

// A semaphore never grants more than its limit, wakes a waiter on a
// release, refuses another limit while it has holders, takes a new one
// when it has none, and frees the permits of a client that dies.
func TestSemaphoreDriver(t *testing.T) {
	srv := testserver.Etcd(t)
	h := &harness{endpoints: []string{"http://" + srv.Addr()}}
	_, d1 := kindsClient(t, h)
	c2, d2 := kindsClient(t, h)
	const name = "kinds/sem"

	p1 := mustKind(t, d1, name, driver.Permit, 2)
	p2 := mustKind(t, d2, name, driver.Permit, 2)
	if p2.g.Token <= p1.g.Token {
		t.Errorf("tokens %d then %d", p1.g.Token, p2.g.Token)
	}
	refused(t, d1, name, driver.Permit, 2)
	_, err := d1.Acquire(t.Context(), driver.Request{Name: name, Owner: "x", TTL: 10 * time.Second, Kind: driver.Permit, Limit: 3})
	if !errors.Is(err, dlock.ErrLimitMismatch) {
		t.Fatalf("acquire with another limit while held: %v; want ErrLimitMismatch", err)
	}
	ki := d1.(driver.KindInspector)
	info, err := ki.InspectKind(t.Context(), name, driver.Permit)
	if err != nil || !info.Held || info.Limit != 2 || len(info.Holders) != 2 || info.Token != p2.g.Token {
		t.Fatalf("InspectKind = %+v, %v", info, err)
	}
	w := waitKind(t, d1, name, driver.Permit, 2)
	notYet(t, w, "a third permit")
	p1.release(t)
	p3 := granted(t, w, "the waiting permit")
	if p3.g.Token <= p2.g.Token {
		t.Errorf("token %d after %d", p3.g.Token, p2.g.Token)
	}
	// A client that dies frees its permit: its session ends with it.
	w2 := waitKind(t, d1, name, driver.Permit, 2)
	notYet(t, w2, "a permit while two are held")
	c2.Close()
	p4 := granted(t, w2, "the permit freed by a closed client")
	p3.release(t)
	p4.release(t)
	// No holders: a new limit replaces the old.
	var hs []*hold
	for range 3 {
		hs = append(hs, mustKind(t, d1, name, driver.Permit, 3))
	}
	refused(t, d1, name, driver.Permit, 3)
	for _, h := range hs {
		h.release(t)
	}
}

// A waiter gets the permit of whichever holder releases first, not only
// the oldest's.
func TestSemaphoreLaterHolderReleases(t *testing.T) {
	srv := testserver.Etcd(t)
	h := &harness{endpoints: []string{"http://" + srv.Addr()}}
	_, d := kindsClient(t, h)
	const name = "kinds/sem-later"
	a := mustKind(t, d, name, driver.Permit, 2)
	b := mustKind(t, d, name, driver.Permit, 2)
	w := waitKind(t, d, name, driver.Permit, 2)
	notYet(t, w, "a third permit")
	b.release(t)
	granted(t, w, "the permit freed by the later holder").release(t)
	a.release(t)
}

// Under contention by 8 holders over 2 clients, never more than the limit
// hold at once, and every contender gets its permit.
func TestSemaphoreContention(t *testing.T) {
	srv := testserver.Etcd(t)
	h := &harness{endpoints: []string{"http://" + srv.Addr()}}
	_, d1 := kindsClient(t, h)
	_, d2 := kindsClient(t, h)
	const (
		name  = "kinds/sem-contention"
		limit = 3
	)
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
				ch := waitKind(t, d, name, driver.Permit, limit)
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
				hd.release(t)
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
