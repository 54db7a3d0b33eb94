package mysqllock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/dlock/dlock/internal/testserver"
)

// A release of a write hold from a client whose every turn takes longer
// than table mode's transaction bound (sqlbase.MaxTxIdle) still frees the
// lock. It was a transaction that locked the hold's row over four round
// trips: the server ended the session at the bound, the release failed,
// and nothing tried it again, so the hold stayed until its TTL (an
// adversary pass: 7 of 20 pauses of 7 s in an Unlock, TTL 60 s). Each of
// its statements now stands alone.
func TestReleaseOfSlowClientFrees(t *testing.T) {
	be := sqlBackend(t)
	ctx := t.Context()
	px := testserver.NewProxy(t, be.Server.Addr())
	t.Cleanup(px.Close)
	a := drivertest.MustOpen(t, strings.Replace(be.URL("table"), be.Server.Addr(), px.Addr(), 1))
	b := drivertest.MustOpen(t, be.URL("table"))
	l, err := a.RWMutex("slow-release", dlock.WithTTL(time.Minute), dlock.WithoutRenewal()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Each way: half the bound and a second, so every idle gap the server
	// sees is over the bound.
	px.SetDelay(sqlbase.MaxTxIdle/2 + time.Second)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock from a slow client: %v", err)
	}
	px.SetDelay(0)
	lb, err := b.RWMutex("slow-release").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the slow client's Unlock: %v", err)
	}
	_ = lb.Unlock(ctx)
}
