package sqltest

import (
	"errors"
	"testing"

	"github.com/dlock/dlock"
)

// Rows are a query's rows, as pgx and database/sql both give them.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// SummaryOf checks rows of a kinds acquire's read of the others' holds
// (owner, kind, time left, count): one row, summing n holds.
func SummaryOf(t *testing.T, rows Rows, err error, n int64) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var got, sum int64
	for rows.Next() {
		var owner string
		var kind, left, count int64
		if err := rows.Scan(&owner, &kind, &left, &count); err != nil {
			t.Fatal(err)
		}
		got, sum = got+1, sum+count
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got != 1 || sum != n {
		t.Errorf("%d rows summing %d holds; want 1 row of %d", got, sum, n)
	}
}

// SummedHolds: a read-write or semaphore acquire in table mode reads, of
// a lock's holds, its own and the others' summed up by kind, not a row per
// hold (a client that stopped reading 30,000 readers' rows held the lock's
// state row while the server's send was blocked; every acquire of a lock
// with n holders read n rows). The verdicts that count holds still count
// every one: a semaphore of n permits, all held by owners of their own,
// refuses the next until one is given back, and a write waits for n
// readers. check runs while the n reads and n permits of name are held
// (the backend's own look at what its acquire reads).
func SummedHolds(t *testing.T, c *dlock.Client, name string, n int, check func()) {
	ctx := t.Context()
	var reads, permits []*dlock.Lease
	for range n {
		l, err := c.RWMutex(name).RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reads = append(reads, l)
		if l, err = c.Semaphore(name, n).Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		permits = append(permits, l)
	}
	check()
	if l, err := c.Semaphore(name, n).TryAcquire(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		if err == nil {
			_ = l.Unlock(ctx)
		}
		t.Fatalf("a permit past %d held: %v; want ErrNotAcquired", n, err)
	}
	if l, err := c.RWMutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		if err == nil {
			_ = l.Unlock(ctx)
		}
		t.Fatalf("a write beside %d reads: %v; want ErrNotAcquired", n, err)
	}
	if err := permits[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.Semaphore(name, n).TryAcquire(ctx)
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
