// Package sqltest holds the tests that the two SQL backends, pglock and
// mysqllock, run alike against their servers: what their row and session
// modes do when a holder's connection is cut off, blackholed or killed, and
// what table mode does when a release fails.
package sqltest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/dlock/dlock/internal/testserver"
)

// Backend is a SQL backend under test, on a server of its own.
type Backend struct {
	Server *testserver.Server
	// URL is the URL of Server in mode (one of the sqlbase modes).
	URL func(mode string) string
}

// open opens a client of the server in mode.
func (be Backend) open(t *testing.T, mode string) *dlock.Client {
	t.Helper()
	return drivertest.MustOpen(t, be.URL(mode))
}

// openVia opens a client of the server in mode whose connections go
// through a proxy of their own, which it returns. The proxy is closed
// before the client when t ends, so that no cleanup waits on a blackhole
// (pgx's cancel requests would).
func (be Backend) openVia(t *testing.T, mode string) (*testserver.Proxy, *dlock.Client) {
	t.Helper()
	px := testserver.NewProxy(t, be.Server.Addr())
	c := drivertest.MustOpen(t, strings.Replace(be.URL(mode), be.Server.Addr(), px.Addr(), 1))
	t.Cleanup(px.Close)
	return px, c
}

// connModes are the modes that hold a lock by a connection.
var connModes = []string{sqlbase.ModeRow, sqlbase.ModeSession}

// LongWaitLeaseIsLive: a Lock that waited longer than its TTL gets a live
// lease, renewed like any other: its time counts from after the wait (issue
// 15, finding 6).
func LongWaitLeaseIsLive(t *testing.T, be Backend) {
	for _, mode := range connModes {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			const ttl = time.Second
			a, b := be.open(t, mode), be.open(t, mode)
			la, err := a.Mutex("long-wait", dlock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			waiter := drivertest.Go(func() (*dlock.Lease, error) { return b.Mutex("long-wait", dlock.WithTTL(ttl)).Lock(ctx) })
			time.Sleep(3 * ttl) // b waits three TTLs
			if err := la.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			l := waiter.Want(t, 10*time.Second, "the waiter's Lock")
			select { // three TTLs: live only if renewed
			case <-l.Done():
				t.Fatalf("the lease of a Lock that waited 3 TTLs ended: %v", l.Err())
			case <-time.After(3 * ttl):
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// BlackholedHolderFreed: a holder whose traffic is blackholed (dropped, not
// closed) loses its lock on the server within about its TTL, so another
// client gets it (issue 15, finding 7); the holder is told first.
func BlackholedHolderFreed(t *testing.T, be Backend) {
	for _, mode := range connModes {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			const ttl = 3 * time.Second
			px, a := be.openVia(t, mode)
			b := be.open(t, mode)
			la, err := a.Mutex("blackhole", dlock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			px.Blackhole()
			start := time.Now()
			// Bound: the TTL from the holder's last statement (at most TTL/3
			// before the blackhole), and generous room for a loaded machine.
			// Without a bound the server keeps the lock for hours.
			lctx, cancel := context.WithTimeout(ctx, ttl+10*time.Second)
			defer cancel()
			lb, err := b.Mutex("blackhole", dlock.WithTTL(ttl)).Lock(lctx)
			if err != nil {
				t.Fatalf("another client did not get the lock within %v of the blackhole: %v", time.Since(start), err)
			}
			took := time.Since(start)
			t.Logf("another client acquired %v after the blackhole (TTL %v)", took.Round(time.Millisecond), ttl)
			select {
			case <-la.Done():
				if !errors.Is(la.Err(), dlock.ErrLeaseLost) {
					t.Fatalf("holder's Err = %v", la.Err())
				}
			default:
				t.Fatal("the blackholed holder was not told before another client acquired")
			}
			if err := lb.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// BlackholedUnlockReturns: Unlock by a holder whose traffic is blackholed
// returns when its ctx ends, and so does the client's Close: neither waits
// on the dead connection.
func BlackholedUnlockReturns(t *testing.T, be Backend) {
	for _, mode := range connModes {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			px, a := be.openVia(t, mode)
			la, err := a.Mutex("blackhole-unlock", dlock.WithTTL(30*time.Second)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			px.Blackhole()
			call := drivertest.Go(func() (struct{}, error) {
				uctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				err := la.Unlock(uctx)
				_ = a.Close()
				return struct{}{}, err
			})
			// generous: the ctx ends after 1 s
			if _, err := call.Result(t, 20*time.Second, "Unlock and Close over a blackholed connection"); err == nil {
				t.Fatal("Unlock over a blackholed connection succeeded")
			}
		})
	}
}

// BlackholedWaiterFreed: a waiter whose traffic is blackholed while it waits
// is granted the lock on the server and never hears of it: the server frees
// the lock about a TTL later, since the session was bounded before the wait
// (issue 15, finding 7, the waiter's side).
func BlackholedWaiterFreed(t *testing.T, be Backend) {
	for _, mode := range connModes {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			const ttl = 3 * time.Second
			px, w := be.openVia(t, mode)
			a, b := be.open(t, mode), be.open(t, mode)
			la, err := a.Mutex("blackhole-waiter", dlock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() { _, _ = w.Mutex("blackhole-waiter", dlock.WithTTL(ttl)).Lock(wctx) }()
			time.Sleep(time.Second) // w is queued on the server
			px.Blackhole()
			if err := la.Unlock(ctx); err != nil { // the server grants w
				t.Fatal(err)
			}
			start := time.Now()
			lctx, cancel2 := context.WithTimeout(ctx, ttl+10*time.Second)
			defer cancel2()
			lb, err := b.Mutex("blackhole-waiter", dlock.WithTTL(ttl)).Lock(lctx)
			if err != nil {
				t.Fatalf("another client did not get the lock within %v of a blackholed waiter's grant: %v", time.Since(start), err)
			}
			t.Logf("another client acquired %v after the blackholed waiter's grant (TTL %v)", time.Since(start).Round(time.Millisecond), ttl)
			_ = lb.Unlock(ctx)
		})
	}
}

// TableFailedReleaseNotReentered: a release that fails while the server is
// down leaves no hold that the owner then re-enters: its next Lock gets a
// new token, and once it unlocks another client gets the lock (issue 15,
// finding 8).
func TableFailedReleaseNotReentered(t *testing.T, be Backend) {
	srv := be.Server
	ctx := t.Context()
	const ttl = 5 * time.Second
	a := be.open(t, sqlbase.ModeTable)
	m := a.Mutex("failed-release", dlock.WithTTL(ttl))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := l.Token()
	srv.Kill()
	if err := l.Unlock(ctx); err == nil {
		t.Fatal("Unlock succeeded with the server down")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	b := be.open(t, sqlbase.ModeTable)
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l2, err := m.Lock(lctx)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= old {
		t.Fatalf("the owner's next Lock has token %d; the hold whose release failed had %d: it re-entered it", l2.Token(), old)
	}
	info, err := b.Inspect(ctx, "failed-release")
	if err != nil || info.Holds != 1 {
		t.Fatalf("Inspect = %+v, %v; want one hold", info, err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	bctx, cancel2 := context.WithTimeout(ctx, ttl)
	defer cancel2()
	lb, err := b.Mutex("failed-release").Lock(bctx)
	if err != nil {
		t.Fatalf("another client did not get the lock after the owner unlocked: %v", err)
	}
	_ = lb.Unlock(ctx)
}

// KilledHolder: ending the holder's connection on the server (kill, given
// the holder's lease) ends its row or session lock: the holder is told at
// its next renewal, its lease lost, and a waiter takes the lock.
func KilledHolder(t *testing.T, be Backend, kill func(ctx context.Context, t *testing.T, l *dlock.Lease)) {
	for _, mode := range connModes {
		t.Run(mode, func(t *testing.T) {
			a, b := be.open(t, mode), be.open(t, mode)
			ctx := t.Context()
			l, err := a.Mutex("killed", dlock.WithTTL(600*time.Millisecond)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				wl, err := b.Mutex("killed").Lock(ctx)
				if err == nil {
					err = wl.Unlock(ctx)
				}
				got <- err
			}()
			kill(ctx, t, l)
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("waiter did not get the lock after the holder's connection was killed")
			}
			select {
			case <-l.Done():
				if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
					t.Fatalf("Err = %v", l.Err())
				}
			case <-time.After(time.Second):
				t.Fatal("holder not told within a renewal interval")
			}
		})
	}
}
