package drivertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"go.uber.org/goleak"
)

// Re-entry by one owner from two clients (processes) whose leases have
// different TTLs: the shorter lease's renewals and release must not cut the
// store's expiry under the longer lease, which its holder cannot know of,
// or a third client would take the lock while that lease reads valid.
func (s *suite) testSharedOwnerTTLs(t *testing.T) {
	s.sharedOwnerTTLs(t, func(ctx context.Context, c *dlock.Client, name string, opts ...dlock.Option) (*dlock.Lease, error) {
		return c.Mutex(name, opts...).Lock(ctx)
	})
}

// sharedOwnerTTLs is testSharedOwnerTTLs for the lock that take takes.
func (s *suite) sharedOwnerTTLs(t *testing.T, take func(ctx context.Context, c *dlock.Client, name string, opts ...dlock.Option) (*dlock.Lease, error)) {
	if !s.caps.StoreReentrant { // the owner's second client queues: nothing to cut
		return
	}
	name := lockName(t)
	a, b, c := s.client(t), s.client(t), s.client(t)
	owner := dlock.NewOwnerID()
	short := max(2*s.caps.TTL, 200*time.Millisecond)
	long, err := take(t.Context(), a, name, dlock.WithOwner(owner), dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock(t, long)
	l, err := take(t.Context(), b, name, dlock.WithOwner(owner), dlock.WithTTL(short))
	if err != nil {
		t.Fatalf("re-entry from another client: %v", err)
	}
	time.Sleep(short) // b's lease is renewed two or three times
	unlock(t, l)
	ctx, cancel := context.WithTimeout(t.Context(), short+s.caps.Slack+s.caps.EarlyExpiry)
	defer cancel()
	other, err := take(ctx, c, name)
	if err == nil {
		defer unlock(t, other)
		if long.Err() == nil {
			t.Fatalf("a third client took the lock (token %d) while the owner's 30 s lease from another client reads valid "+
				"(%v left): the %v lease's renewals or release cut the store's expiry under it",
				other.Token(), long.TimeLeft().Round(time.Millisecond), short)
		}
		t.Fatalf("the owner's 30 s lease was lost (%v) after a %v re-entry from another client was unlocked", long.Err(), short)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third client's take = %v; want it still waiting at its deadline", err)
	}
	if long.Err() != nil {
		t.Fatalf("the owner's 30 s lease ended: %v", long.Err())
	}
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

// A client closed while its Lock waits, racing the holder's Unlock (which
// may hand the lock to that waiter): once Close and Unlock have returned,
// nothing of the closed client's waiter is left in the store, and another
// client takes the lock at once. Close must not close the driver before the
// woken wait has left its queue, or released what it was just given.
// (Stores whose locks live on a connection or session free them when the
// server sees it closed: there the lock must come free within a second.)
func (s *suite) testCloseDuringWait(t *testing.T) {
	a, b := s.client(t), s.client(t)
	for round := range 3 {
		name := fmt.Sprintf("%s/%d", lockName(t), round)
		l := mustLock(t, a.Mutex(name))
		c := s.client(t)
		w := Go(func() (*dlock.Lease, error) { return c.Mutex(name).Lock(t.Context()) })
		time.Sleep(time.Duration(20+10*round) * time.Millisecond) // setup: let it queue, or not yet
		closed := Go(func() (struct{}, error) { return struct{}{}, c.Close() })
		unlock(t, l)
		if _, err := closed.Result(t, 15*time.Second, "Close"); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		if wl, err := w.Result(t, 15*time.Second, "the closed client's Lock"); err == nil && wl.Err() == nil {
			t.Fatalf("round %d: the closed client's Lock returned a lease that reads valid", round)
		}
		within := time.Duration(0)
		if s.caps.ConnBound || s.caps.SessionBound {
			within = time.Second + s.caps.Slack
		}
		for end := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
			got, err := b.Mutex(name).TryLock(t.Context())
			if err == nil {
				unlock(t, got)
				break
			}
			if !errors.Is(err, dlock.ErrNotAcquired) || time.Now().After(end) {
				info, _ := b.Inspect(t.Context(), name)
				t.Fatalf("round %d: after the holder's Unlock and the waiter's client's Close, TryLock = %v; the store has %+v", round, err, info)
			}
		}
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
	l := mustLock(t, a.Mutex(name, dlock.WithTTL(10*time.Second), dlock.WithLabel("worker-7 on host-a")))
	info, err = b.Inspect(t.Context(), name)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if !s.caps.NoLabels && (info.Label != "worker-7 on host-a" || l.Label() != info.Label) {
		t.Errorf("Inspect's Label = %q, the lease's %q; want the holder's label %q", info.Label, l.Label(), "worker-7 on host-a")
	}
	ttlOK := info.TTL > 0 && info.TTL <= 10*time.Second
	if s.caps.ConnBound || s.caps.SessionBound { // held while a connection or session lives: no time left
		ttlOK = info.TTL == 0
	}
	if !info.Held || info.Owner != l.Owner() || info.Token != l.Token() || !ttlOK {
		t.Fatalf("Inspect = %+v; want held by %s with token %d and 0 < TTL <= 10s (0 if connection-bound)", info, l.Owner(), l.Token())
	}
	unlock(t, l)
	// The default label says which host and process holds the lock.
	l = mustLock(t, a.Mutex(name))
	info, err = b.Inspect(t.Context(), name)
	host, _ := os.Hostname()
	if err != nil || !s.caps.NoLabels && info.Label != fmt.Sprintf("%s:%d", host, os.Getpid()) {
		t.Errorf("Inspect = %+v, %v; want the default label host:pid = %s:%d", info, err, host, os.Getpid())
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
