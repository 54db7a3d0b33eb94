package pglock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
)

// rawHold opens a connection that runs stmts in a transaction it keeps
// open (the last statement may wait: it runs in a goroutine of its own),
// and returns the connection's backend pid.
func rawHold(t *testing.T, url string, stmts ...string) int32 {
	t.Helper()
	c := connect(t, url)
	for _, q := range append([]string{"BEGIN"}, stmts[:len(stmts)-1]...) {
		if _, err := c.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	pid := int32(c.PgConn().PID())
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_, _ = c.Exec(ctx, stmts[len(stmts)-1])
	}()
	t.Cleanup(func() { cancel(); <-ran }) // before connect's Close
	time.Sleep(200 * time.Millisecond)    // the last statement has run, or waits
	return pid
}

// gone reports whether backend pid is gone, waiting a little for it: a
// backend told to end takes a moment.
func gone(t *testing.T, url string, pid int32) bool {
	t.Helper()
	c := connect(t, url)
	for end := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var alive bool
		if err := c.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&alive); err != nil {
			t.Fatal(err)
		}
		if !alive || time.Now().After(end) {
			return !alive
		}
	}
}

// Row mode: a force ends the connections holding the row, also one that
// waits itself for something else (another row, an advisory lock), and
// only those: it followed the wait of such a holder to whatever that waits
// for, and ended the holder of another name, even a session in another
// database, and left the lock held (finding of an adversary pass). Shared
// row locks are ended one by one, and a full pool does not hold the force
// up.
func TestForceRowHolders(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	a := drivertest.MustOpen(t, url+"&mode=row&pool_max_conns=2")
	for _, n := range []string{"x", "y", "z"} {
		heldOnce(t, a, n)
	}
	lockX := "SELECT name FROM dlock_rows WHERE name = 'x' FOR UPDATE"
	t.Run("waiting-on-another-row", func(t *testing.T) {
		y, err := a.Mutex("y").Lock(t.Context()) // a dlock lease on another name
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = y.Unlock(context.Background()) }()
		h := rawHold(t, url, lockX, "SELECT name FROM dlock_rows WHERE name = 'y' FOR UPDATE")
		if err := a.ForceUnlock(t.Context(), "x"); err != nil {
			t.Fatal(err)
		}
		if !gone(t, url, h) {
			t.Error("the holder of x, waiting for y, was not ended")
		}
		var pl *pglock.Lease
		if !y.As(&pl) {
			t.Fatal("no pglock lease")
		}
		if gone(t, url, int32(pl.PID)) {
			t.Error("the force of x ended the holder of y")
		}
	})
	t.Run("waiting-on-advisory", func(t *testing.T) {
		blocker := rawHold(t, url, "SELECT pg_advisory_xact_lock(42)", "SELECT 1")
		h := rawHold(t, url, lockX, "SELECT pg_advisory_xact_lock(42)")
		if err := a.ForceUnlock(t.Context(), "x"); err != nil {
			t.Fatal(err)
		}
		if !gone(t, url, h) {
			t.Error("the holder of x, waiting for an advisory lock, was not ended")
		}
		if gone(t, url, blocker) {
			t.Error("the force of x ended what its holder waited for")
		}
	})
	t.Run("shared", func(t *testing.T) {
		share := "SELECT name FROM dlock_rows WHERE name = 'x' FOR SHARE"
		h1, h2 := rawHold(t, url, share, "SELECT 1"), rawHold(t, url, share, "SELECT 1")
		if err := a.ForceUnlock(t.Context(), "x"); err != nil {
			t.Fatal(err)
		}
		if g1, g2 := gone(t, url, h1), gone(t, url, h2); !g1 || !g2 {
			t.Errorf("of two FOR SHARE holders, ended: %v, %v; want both", g1, g2)
		}
	})
	// The pool (2 connections) is full: a lease holds one, the other is free.
	l, err := a.Mutex("z").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	h := rawHold(t, url, lockX, "SELECT 1")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := a.ForceUnlock(ctx, "x"); err != nil {
		t.Fatalf("ForceUnlock with the pool near full: %v", err)
	}
	if !gone(t, url, h) {
		t.Error("the holder was not ended")
	}
	_ = l.Unlock(t.Context())
	lockedAfterForce(t, a, "x")
}
