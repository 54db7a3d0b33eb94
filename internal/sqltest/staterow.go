package sqltest

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/sqlbase"
)

// StateRowWaitKept: a table-mode acquire of a read-write lock or a permit
// locks the lock's state row first, and writes the hold after, with an
// expiry the server counts from then. Its validity was counted from the
// attempt's start, so an attempt that waited on the row longer than its TTL
// (behind the transaction of a client paused inside one, which the server
// ends only at its idle bound) found its grant too late to be safe,
// released it, and tried again after a backoff: each waiter lost its grant
// and a pause, and the fault suite saw tokens skip (pause-waiter, on a
// loaded machine). The validity now counts from after the row is locked.
//
// lockRows locks the state rows of name from a connection of its own (for
// a read-write lock and a semaphore alike) and returns what unlocks them.
func StateRowWaitKept(t *testing.T, be Backend, lockRows func(ctx context.Context, t *testing.T, name string) (unlock func())) {
	c := be.open(t, sqlbase.ModeTable)
	if err := c.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const name = "state-row-wait"
	// The attempt waits on the row a second past its TTL; the grant's reply
	// then has the TTL, less the grant margin, to come back in. The setup's
	// own hold has a TTL a loaded machine cannot miss.
	const ttl, long = 2 * time.Second, 30 * time.Second
	for _, tc := range []struct {
		kind string
		lock func(ttl time.Duration) (*dlock.Lease, error)
	}{
		{"write", func(ttl time.Duration) (*dlock.Lease, error) { return c.RWMutex(name, dlock.WithTTL(ttl)).Lock(ctx) }},
		{"read", func(ttl time.Duration) (*dlock.Lease, error) { return c.RWMutex(name, dlock.WithTTL(ttl)).RLock(ctx) }},
		{"permit", func(ttl time.Duration) (*dlock.Lease, error) {
			return c.Semaphore(name, 2, dlock.WithTTL(ttl)).Acquire(ctx)
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			l, err := tc.lock(long) // makes the state row
			if err != nil {
				t.Fatal(err)
			}
			first := l.Token()
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			unlock := lockRows(ctx, t, name)
			got := make(chan error, 1)
			go func() {
				l, err = tc.lock(ttl)
				got <- err
			}()
			time.Sleep(ttl + time.Second) // the attempt waits on the state row past its TTL
			unlock()
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			defer l.Unlock(ctx)
			if l.Token() != first+1 {
				t.Errorf("token %d after a wait on the state row, want %d: the grant in between was released as too late", l.Token(), first+1)
			}
		})
	}
}
