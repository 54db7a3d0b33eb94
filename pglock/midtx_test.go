package pglock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
)

// A table-mode client cut off between two statements of a read-write
// lock's acquire transaction, which locks the lock's state row, keeps no
// other client out for long: the server ends its session once it has been
// idle in the transaction for its TTL. It used to keep the row locked, and
// every other client of the lock waiting, for as long as the server
// believed the connection alive: for good behind a proxy that keeps it up,
// hours with default keepalives. (A client paused there, by a loaded
// machine or a debugger, did the same until it ran again.)
func TestTableCutMidTransactionFreed(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv) + "&mode=" + string(pglock.ModeTable)
	admin := connect(t, testserver.PostgresURL(srv))
	b := drivertest.MustOpen(t, url)
	const ttl = 2 * time.Second
	for try := 0; ; try++ {
		if try == 40 {
			t.Fatal("never caught the client between two statements of a transaction")
		}
		name, app := fmt.Sprintf("midtx-%d", try), fmt.Sprintf("dlock-midtx-%d", try)
		px := testserver.NewProxy(t, srv.Addr())
		a := drivertest.MustOpen(t, strings.Replace(url, srv.Addr(), px.Addr(), 1)+"&application_name="+app)
		t.Cleanup(px.Close) // before the client's Close: no cleanup waits on the blackhole
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		go func() { // most of a Lock and Unlock's time is in the acquire's transaction
			for ctx.Err() == nil {
				if l, err := a.RWMutex(name, dlock.WithTTL(ttl)).Lock(ctx); err == nil {
					_ = l.Unlock(ctx)
				}
			}
		}()
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		px.Blackhole()
		time.Sleep(300 * time.Millisecond)
		var caught bool
		if err := admin.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE application_name = $1 AND state = 'idle in transaction' AND query LIKE '%dlock_%')`, app).Scan(&caught); err != nil {
			t.Fatal(err)
		}
		if !caught {
			continue
		}
		t.Logf("caught the client in a transaction on try %d", try+1)
		// Room for a loaded machine: the bound is the TTL.
		lctx, lcancel := context.WithTimeout(t.Context(), ttl+13*time.Second)
		defer lcancel()
		start := time.Now()
		l, err := b.RWMutex(name, dlock.WithTTL(ttl)).Lock(lctx)
		if err != nil {
			t.Fatalf("another client's write Lock while the cut-off one is in its transaction: %v after %v", err, time.Since(start))
		}
		t.Logf("another client locked %v after the check", time.Since(start).Round(time.Millisecond))
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		return
	}
}
