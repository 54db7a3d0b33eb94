package redislock_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// TestCloseEndsWaitOnAppClient: a Lock queued behind a holder ends with
// ErrClosed when its dlock client closes, and leaves nothing behind: the
// holder's Unlock leaves the lock free for another client at once. The
// go-redis client underneath is the application's and stays open, so only
// the driver's own binding of its wait to Close (Caps.EndsWaits: dlock
// binds nothing around a Redis wait) can end it. Close comes at random
// moments, some during the Lock's first round trip, some while it waits.
func TestCloseEndsWaitOnAppClient(t *testing.T) {
	srv := testserver.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	open := func() *dlock.Client {
		c, err := redislock.Open(t.Context(), rdb, redislock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a, b := open(), open()
	for round := range 20 {
		name := fmt.Sprintf("closewait/%d", round)
		held, err := a.Mutex(name).Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		c := open()
		w := drivertest.Go(func() (*dlock.Lease, error) { return c.Mutex(name).Lock(t.Context()) })
		time.Sleep(time.Duration(rand.N(3000)) * time.Microsecond) // setup: queued, or not yet
		if err := c.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		// The holder still holds: a wait not ended by Close would run on.
		if l, err := w.Result(t, 10*time.Second, "the closed client's Lock"); !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("round %d: the closed client's Lock = %v, %v; want ErrClosed", round, l, err)
		}
		if err := held.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		got, err := b.Mutex(name).TryLock(t.Context())
		if err != nil {
			info, _ := b.Inspect(t.Context(), name)
			t.Fatalf("round %d: after the holder's Unlock, TryLock = %v; the store has %+v", round, err, info)
		}
		if err := got.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
