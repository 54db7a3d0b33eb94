package sqltest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/sqlbase"
)

// CutMidTransactionFreed: a table-mode client cut off between two
// statements of a read-write lock's acquire transaction, which locks the
// lock's state row, keeps no other client out for long: the server ends
// its session once it has been idle in the transaction for its TTL. It
// used to keep the row locked, and every other client of the lock
// waiting, for as long as the server kept the session (for good behind a
// proxy that keeps the connection up; eight hours of MySQL's wait_timeout).
// A client paused there, by a loaded machine, did the same until it ran
// again.
//
// Each try cuts off a new client, hammering the lock, at a random moment,
// until idleInTx (is a session idle in a transaction, for over 200 ms?)
// finds it caught inside one; no other client is busy then.
func CutMidTransactionFreed(t *testing.T, be Backend, idleInTx func(ctx context.Context) (bool, error)) {
	b := be.open(t, sqlbase.ModeTable)
	const ttl = 2 * time.Second
	for try := 0; ; try++ {
		if try == 40 {
			t.Fatal("never caught the client between two statements of a transaction")
		}
		name := fmt.Sprintf("midtx-%d", try)
		px, a := be.openVia(t, sqlbase.ModeTable)
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
		caught, err := idleInTx(t.Context())
		if err != nil {
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
