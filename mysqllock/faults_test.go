package mysqllock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

// A Lock that waited longer than its TTL gets a live lease, renewed like any
// other: its time counts from after the wait (issue 15, finding 6).
func TestLongWaitLeaseIsLive(t *testing.T) {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	for _, mode := range []mysqllock.Mode{mysqllock.ModeRow, mysqllock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := t.Context()
			const ttl = time.Second
			a, b := open(t, url, mode), open(t, url, mode)
			la, err := a.Mutex("long-wait", dlock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				l   *dlock.Lease
				err error
			}
			got := make(chan result, 1)
			go func() {
				l, err := b.Mutex("long-wait", dlock.WithTTL(ttl)).Lock(ctx)
				got <- result{l, err}
			}()
			time.Sleep(3 * ttl) // b waits three TTLs
			if err := la.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			var r result
			select {
			case r = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter did not get the lock")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			select { // three TTLs: live only if renewed
			case <-r.l.Done():
				t.Fatalf("the lease of a Lock that waited 3 TTLs ended: %v", r.l.Err())
			case <-time.After(3 * ttl):
			}
			if err := r.l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A holder whose traffic is blackholed (dropped, not closed) loses its lock
// on the server within about its TTL, so another client gets it (issue 15,
// finding 7); the holder is told first.
func TestBlackholedHolderFreed(t *testing.T) {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	for _, mode := range []mysqllock.Mode{mysqllock.ModeRow, mysqllock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := t.Context()
			const ttl = 3 * time.Second
			px := testserver.NewProxy(t, srv.Addr())
			a := open(t, strings.Replace(url, srv.Addr(), px.Addr(), 1), mode)
			t.Cleanup(px.Close) // before a's Close, so that no cleanup waits on the blackhole
			b := open(t, url, mode)
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

// Unlock by a holder whose traffic is blackholed returns when its ctx ends,
// and so does the client's Close: neither waits on the dead connection.
func TestBlackholedUnlockReturns(t *testing.T) {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	for _, mode := range []mysqllock.Mode{mysqllock.ModeRow, mysqllock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := t.Context()
			px := testserver.NewProxy(t, srv.Addr())
			a := open(t, strings.Replace(url, srv.Addr(), px.Addr(), 1), mode)
			la, err := a.Mutex("blackhole-unlock", dlock.WithTTL(30*time.Second)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			px.Blackhole()
			done := make(chan error, 1)
			go func() {
				uctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				err := la.Unlock(uctx)
				_ = a.Close()
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Unlock over a blackholed connection succeeded")
				}
			case <-time.After(20 * time.Second): // generous: the ctx ends after 1 s
				t.Fatal("Unlock or Close over a blackholed connection did not return")
			}
		})
	}
}

// A waiter whose traffic is blackholed while it waits is granted the lock on
// the server and never hears of it: the server frees the lock about a TTL
// later, since the session was bounded before the wait (issue 15, finding
// 7, the waiter's side).
func TestBlackholedWaiterFreed(t *testing.T) {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	for _, mode := range []mysqllock.Mode{mysqllock.ModeRow, mysqllock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := t.Context()
			const ttl = 3 * time.Second
			px := testserver.NewProxy(t, srv.Addr())
			w := open(t, strings.Replace(url, srv.Addr(), px.Addr(), 1), mode)
			t.Cleanup(px.Close) // before w's Close, so that no cleanup waits on the blackhole
			a, b := open(t, url, mode), open(t, url, mode)
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
