package pglock_test

import (
	"errors"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
)

// A read-write or semaphore acquire reads, of a lock's holds, its own and
// a summary of the others' by kind, not a row per hold: with a row per
// hold, a client that stopped reading 30,000 readers' rows held the lock's
// state row while the server's send was blocked (an adversary pass), and
// every acquire of a lock with n holders read n rows. The verdicts that
// count holds still count every one: a semaphore of n permits, all held
// by owners of their own, refuses the next until one is given back.
func TestKindAcquireReadsSummary(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	c := open(t, url, pglock.ModeTable)
	ctx := t.Context()
	const n = 60
	var reads, permits []*dlock.Lease
	for range n {
		l, err := c.RWMutex("summary").RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reads = append(reads, l)
		if l, err = c.Semaphore("summary", n).Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		permits = append(permits, l)
	}
	conn := connect(t, url)
	for _, tc := range []struct {
		q    string
		fam  driver.Kind
		want int64
	}{
		{pglock.KindLiveSQL, driver.Shared, n},
		{pglock.KindLiveSQL, driver.Permit, n},
	} {
		rows, err := conn.Query(ctx, tc.q, "summary", int16(tc.fam.Family()), dlock.NewOwnerID())
		if err != nil {
			t.Fatal(err)
		}
		var got, sum int64
		for rows.Next() {
			var owner string
			var kind int16
			var ms, count int64
			if err := rows.Scan(&owner, &kind, &ms, &count); err != nil {
				t.Fatal(err)
			}
			got, sum = got+1, sum+count
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if got != 1 || sum != tc.want {
			t.Errorf("kind %v: %d rows summing %d holds; want 1 row of %d", tc.fam, got, sum, tc.want)
		}
	}
	if l, err := c.Semaphore("summary", n).TryAcquire(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		if err == nil {
			_ = l.Unlock(ctx)
		}
		t.Fatalf("a permit past %d held: %v; want ErrNotAcquired", n, err)
	}
	if l, err := c.RWMutex("summary").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		if err == nil {
			_ = l.Unlock(ctx)
		}
		t.Fatalf("a write beside %d reads: %v; want ErrNotAcquired", n, err)
	}
	if err := permits[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.Semaphore("summary", n).TryAcquire(ctx)
	if err != nil {
		t.Fatalf("a permit with one of %d given back: %v", n, err)
	}
	permits[0] = l
	for _, l := range append(reads, permits...) {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
