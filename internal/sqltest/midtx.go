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
// its session once it has been idle in the transaction for its TTL, at
// most sqlbase.MaxTxIdle. It used to keep the row locked, and every other
// client of the lock waiting, for as long as the server kept the session
// (for good behind a proxy that keeps the connection up; eight hours of
// MySQL's wait_timeout), and then, bounded, for the requester's own TTL (an
// hour for a lease of an hour). A client paused there, by a loaded machine,
// did the same until it ran again.
//
// Each try cuts off a new client, hammering the lock, at a random moment,
// until idleInTx (is a session idle in a transaction, for over 200 ms?)
// finds it caught inside one; no other client is busy then. With a TTL of
// 2 s the client takes and drops the write lock; with a TTL of an hour,
// which it must not hold when cut off, it tries for it beside a reader
// and is refused.
func CutMidTransactionFreed(t *testing.T, be Backend, idleInTx func(ctx context.Context) (bool, error)) {
	b := be.open(t, sqlbase.ModeTable)
	t.Run("ttl-2s", func(t *testing.T) {
		cutMidTx(t, be, b, idleInTx, 2*time.Second, func(ctx context.Context, rw *dlock.RWMutex) {
			if l, err := rw.Lock(ctx); err == nil {
				_ = l.Unlock(ctx)
			}
		})
	})
	t.Run("ttl-1h", func(t *testing.T) {
		cutMidTx(t, be, b, idleInTx, time.Hour, func(ctx context.Context, rw *dlock.RWMutex) {
			if l, err := rw.TryLock(ctx); err == nil {
				t.Errorf("a write TryLock beside a read hold got token %d", l.Token())
				_ = l.Unlock(ctx)
			}
		})
	})
}

// cutMidTx is CutMidTransactionFreed for one TTL: hammer runs one attempt
// of the cut-off client's. With a TTL over the bound, b holds the lock
// read-locked first, so that the client's write attempts are refused and
// it holds nothing when cut off; then b reads beside it.
func cutMidTx(t *testing.T, be Backend, b *dlock.Client, idleInTx func(ctx context.Context) (bool, error),
	ttl time.Duration, hammer func(ctx context.Context, rw *dlock.RWMutex)) {
	bound := sqlbase.TxIdle(ttl)
	for try := 0; ; try++ {
		if try == 40 {
			t.Fatal("never caught the client between two statements of a transaction")
		}
		name := fmt.Sprintf("midtx-%v-%d", ttl, try)
		if ttl > bound { // a reader, so that the client's write is refused
			r, err := b.RWMutex(name).RLock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Unlock(context.Background()) })
		}
		px, a := be.openVia(t, sqlbase.ModeTable)
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		go func() { // most of an attempt's time is in the acquire's transaction
			rw := a.RWMutex(name, dlock.WithTTL(ttl))
			for ctx.Err() == nil {
				hammer(ctx, rw)
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
		// Room for a loaded machine: the bound is the TTL, at most MaxTxIdle.
		lctx, lcancel := context.WithTimeout(t.Context(), bound+13*time.Second)
		defer lcancel()
		start := time.Now()
		var l *dlock.Lease
		if ttl > bound {
			l, err = b.RWMutex(name).RLock(lctx) // beside the first reader
		} else {
			l, err = b.RWMutex(name, dlock.WithTTL(ttl)).Lock(lctx)
		}
		if err != nil {
			t.Fatalf("another client's Lock while the cut-off one (TTL %v) is in its transaction: %v after %v", ttl, err, time.Since(start))
		}
		t.Logf("another client locked %v after the check", time.Since(start).Round(time.Millisecond))
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		return
	}
}
