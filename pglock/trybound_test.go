package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
)

// A TryLock's client cut off right after it sent its token write (as behind
// a proxy that keeps the connection up) leaves nothing held past its
// lease: the write commits with the request that carries it. The write ran
// in a transaction of its own, bounded in its lock waits, whose COMMIT was
// the next round trip: cut off before it, the client kept the token row
// (and in session mode the lock) for good, and every Lock of the name
// waited (finding of an adversary pass).
func TestTryLockCutAfterToken(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	const ttl = 2 * time.Second
	for _, tc := range []struct{ mode, name, table string }{
		{"row", "cut-row", "dlock_tokens"},
		{"session", "cut-session", "dlock_tokens"},
		{"session", "rw-cut", "dlock_kinds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := drivertest.MustOpen(t, url+"&mode="+tc.mode)
			// A round whose TryLock returned before it sent its token write
			// (on a loaded machine, its other statements can run past their
			// own one-second bound) tested nothing: try again, on a new name.
			for i := range 5 {
				name := fmt.Sprintf("%s-%d", tc.name, i)
				void := cutAfterToken(t, srv, url, b, tc.mode, name, tc.table, ttl)
				if void == nil {
					return
				}
				t.Logf("round %d: the TryLock returned before it sent its token write (%v); tried again", i+1, void)
			}
			t.Fatal("in 5 rounds, the TryLock never sent its token write")
		})
	}
}

// cutAfterToken is one round of TestTryLockCutAfterToken: a TryLock on
// name through a proxy that blackholes right after its token write into
// table, then a Lock on b, which must be granted once the server has ended
// the cut-off session. It returns the TryLock's error when the TryLock
// returned before it sent that write: the round then proves nothing.
func cutAfterToken(t *testing.T, srv *testserver.Server, url string, b *dlock.Client, mode, name, table string, ttl time.Duration) (void error) {
	t.Helper()
	rw := strings.HasPrefix(name, "rw-")
	heldOnce(t, b, name) // the name's rows
	px := testserver.NewProxy(t, srv.Addr())
	a := drivertest.MustOpen(t, strings.Replace(url, srv.Addr(), px.Addr(), 1)+"&mode="+mode)
	defer func() { _ = a.Close() }()
	px.BlackholeAfter([]byte("INSERT INTO " + table))
	actx, acancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var l *dlock.Lease
		var err error
		if rw {
			l, err = a.RWMutex(name, dlock.WithTTL(ttl)).TryRLock(actx)
		} else {
			l, err = a.Mutex(name, dlock.WithTTL(ttl)).TryLock(actx)
		}
		switch {
		case err == nil && px.Blackholed(): // not answered: nothing to unlock through the cut
			t.Errorf("a TryLock cut off before its token's answer returned a lease with token %d", l.Token())
			err = errors.New("granted")
		case err == nil:
			// Never cut: the proxy matches within one read, and on a
			// loaded machine the token write came in two (make
			// test-busy saw it). The round is void; the caller tries
			// again, on a new name.
			err = errors.New("granted, never cut off")
		}
		done <- err
	}()
	var ended error // the TryLock's error, once it has returned
	defer func() {
		px.Close()
		acancel()
		if ended == nil {
			<-done
		}
	}()
	for !px.Blackholed() {
		select {
		case ended = <-done:
			if !px.Blackholed() {
				return ended
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
	// The server ends the cut-off session about a TTL after its last
	// statement; then the lock is free, and its token row too.
	ctx, cancel := context.WithTimeout(t.Context(), 10*ttl)
	defer cancel()
	var l *dlock.Lease
	var err error
	if rw {
		l, err = b.RWMutex(name).Lock(ctx)
	} else {
		l, err = b.Mutex(name).Lock(ctx)
	}
	if err != nil {
		t.Fatalf("Lock after another client's TryLock was cut off with its token write sent: %v", err)
	}
	_ = l.Unlock(t.Context())
	return nil
}

// Row mode's TryLock works where standard_conforming_strings is off (pgx
// refused the query it sent, as it quotes arguments itself for the simple
// protocol; finding of an adversary pass).
func TestTryLockWithoutStandardStrings(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	if _, err := connect(t, url).Exec(t.Context(), "ALTER DATABASE postgres SET standard_conforming_strings = off"); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"row", "session", "table"} {
		c := drivertest.MustOpen(t, url+"&mode="+mode)
		for _, name := range []string{"scs", `back\slash`, `q'uote\`} {
			l, err := c.Mutex(name).TryLock(t.Context())
			if err != nil {
				t.Errorf("%s: TryLock(%q) of a free lock: %v", mode, name, err)
				continue
			}
			if l2, err := c.Mutex(name).TryLock(t.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Errorf("%s: a second TryLock(%q) = %v; want ErrNotAcquired", mode, name, err)
				if err == nil {
					_ = l2.Unlock(t.Context())
				}
			}
			_ = l.Unlock(t.Context())
		}
	}
}

// Row mode holds a pooled connection per lock (or wait) and takes the
// token on another: with every connection held, acquires waited for each
// other's connections until their ctx ended. Row mode holds at most one
// less than the pool's connections, and refuses a pool of one.
func TestRowPoolRoomForTokens(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	if _, err := dlock.Open(t.Context(), url+"&mode=row&pool_max_conns=1"); !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Errorf("row mode with a pool of one connection: %v; want ErrInvalidConfig", err)
	}
	sqltest.LocksOnSmallPool(t, drivertest.MustOpen(t, url+"&mode=row&pool_max_conns=2"))
}

// Session mode on a pool whose connections all hold locks: a TryLock of a
// free lock waited for a connection until its ctx ended (finding of an
// adversary pass). The client holds at most one less than its pool: a
// TryLock beyond is refused at once for want of a slot, and Inspect finds a
// connection.
func TestSessionTryLockBesideFullPool(t *testing.T) {
	srv := testserver.Postgres(t)
	sqltest.TryLocksOnFullPool(t, drivertest.MustOpen(t, testserver.PostgresURL(srv)+"&mode=session&pool_max_conns=2"))
}

// A row-mode Lock's client cut off right after its BEGIN, before the
// statement that bounds its session by the lease: the session stayed idle
// in the transaction for good (holding no lock, but a backend; finding of
// an adversary pass). The BEGIN bounds it.
func TestRowCutAfterBegin(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	const ttl = 2 * time.Second
	px := testserver.NewProxy(t, srv.Addr())
	a := drivertest.MustOpen(t, strings.Replace(url, srv.Addr(), px.Addr(), 1)+"&mode=row")
	px.BlackholeAfter([]byte("begin"))
	actx, acancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if l, err := a.Mutex("cut-early", dlock.WithTTL(ttl)).Lock(actx); err == nil {
			t.Errorf("a Lock cut off after its BEGIN returned a lease with token %d", l.Token())
		}
	}()
	defer func() { px.Close(); acancel(); <-done }()
	admin := connect(t, url)
	seen := false // the cut-off session, idle in its transaction
	for end := time.Now().Add(20 * ttl); ; time.Sleep(100 * time.Millisecond) {
		var n int
		if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		seen = seen || px.Blackholed() && n > 0
		if seen && n == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("blackholed: %v; %d sessions idle in a transaction %v after the cut (TTL %v)", px.Blackholed(), n, 20*ttl, ttl)
		}
	}
}

// A role's lock_timeout does not end a Lock's wait in the database: it
// turned row mode's queue into polling (a FOR UPDATE that failed every
// lock_timeout, tried again later) and made session mode open a new
// session for each try (finding of an adversary pass). Waiters are served
// in the order they came, as the database queues them.
func TestWaitDespiteRoleLockTimeout(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	if _, err := connect(t, url).Exec(t.Context(), "ALTER ROLE postgres SET lock_timeout = '50ms'"); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"row", "session"} {
		t.Run(mode, func(t *testing.T) {
			h := drivertest.MustOpen(t, url+"&mode="+mode)
			held, err := h.Mutex("queue").Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var order []int
			var wg sync.WaitGroup
			for i := range 3 {
				c := drivertest.MustOpen(t, url+"&mode="+mode)
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := c.Mutex("queue").Lock(t.Context())
					if err != nil {
						t.Errorf("waiter %d: %v", i, err)
						return
					}
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					time.Sleep(100 * time.Millisecond)
					_ = l.Unlock(t.Context())
				}()
				time.Sleep(300 * time.Millisecond) // queued before the next one comes
			}
			_ = held.Unlock(t.Context())
			wg.Wait()
			if fmt.Sprint(order) != "[0 1 2]" {
				t.Errorf("waiters served in the order %v; want [0 1 2], as they came", order)
			}
		})
	}
}
