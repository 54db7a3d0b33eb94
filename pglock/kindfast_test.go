package pglock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

// fastKind is one kind of TestKindAcquireHoldsNoRowAcrossRoundTrips: how
// to take and inspect it through a client, and what must hold beside the
// cut client's grant.
type fastKind struct {
	name    string
	acquire func(ctx context.Context, c *dlock.Client) (*dlock.Lease, error)
	beside  func(t *testing.T, c *dlock.Client)
}

// inspect reads the holds of k's lock ("fast-" + its name).
func (k fastKind) inspect(ctx context.Context, c *dlock.Client) (dlock.Info, error) {
	if k.name == "permit" {
		return c.Semaphore("fast-permit", 2, dlock.WithTTL(fastTTL)).Inspect(ctx)
	}
	return c.RWMutex("fast-"+k.name, dlock.WithTTL(fastTTL)).Inspect(ctx)
}

const fastTTL = 30 * time.Second

var fastKinds = []fastKind{
	{name: "permit",
		acquire: func(ctx context.Context, c *dlock.Client) (*dlock.Lease, error) {
			return c.Semaphore("fast-permit", 2, dlock.WithTTL(fastTTL)).Acquire(ctx)
		},
		beside: func(t *testing.T, c *dlock.Client) { // one permit is left, and no more
			l, err := c.Semaphore("fast-permit", 2, dlock.WithTTL(fastTTL)).TryAcquire(t.Context())
			if err != nil {
				t.Fatalf("the second permit: %v", err)
			}
			defer func() { _ = l.Unlock(context.Background()) }()
			if _, err := c.Semaphore("fast-permit", 2, dlock.WithTTL(fastTTL), dlock.WithOwner("third")).TryAcquire(t.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("a third permit of two: %v, want ErrNotAcquired", err)
			}
		}},
	{name: "read",
		acquire: func(ctx context.Context, c *dlock.Client) (*dlock.Lease, error) {
			return c.RWMutex("fast-read", dlock.WithTTL(fastTTL)).RLock(ctx)
		},
		beside: func(t *testing.T, c *dlock.Client) { // readers share it; a writer is kept out
			l, err := c.RWMutex("fast-read", dlock.WithTTL(fastTTL)).TryRLock(t.Context())
			if err != nil {
				t.Fatalf("a second reader: %v", err)
			}
			defer func() { _ = l.Unlock(context.Background()) }()
			if _, err := c.RWMutex("fast-read", dlock.WithTTL(fastTTL), dlock.WithOwner("writer")).TryLock(t.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("a writer beside the readers: %v, want ErrNotAcquired", err)
			}
		}},
	{name: "write",
		acquire: func(ctx context.Context, c *dlock.Client) (*dlock.Lease, error) {
			return c.RWMutex("fast-write", dlock.WithTTL(fastTTL)).Lock(ctx)
		},
		beside: func(t *testing.T, c *dlock.Client) { // nobody else, reader or writer
			rw := c.RWMutex("fast-write", dlock.WithTTL(fastTTL))
			if _, err := rw.TryRLock(t.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("a reader beside the writer: %v, want ErrNotAcquired", err)
			}
			if _, err := rw.TryLock(t.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("a second writer: %v, want ErrNotAcquired", err)
			}
		}},
}

// fastServer starts a server for the tests of tryFast: its URL, a client
// in table mode, and a connection of its own.
func fastServer(t *testing.T) (*testserver.Server, string, *dlock.Client, *pgx.Conn) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	raw, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close(context.Background()) })
	return srv, url, open(t, url, pglock.ModeTable), raw
}

// A read, write or permit acquire locks the state row, decides, grants
// and commits in one message: the row is never locked across a client's
// round trip. Cut off right after sending it, the client holds the row
// from no one: the server has granted and committed (the hold lives its
// TTL, as any grant whose reply is lost), and its session is not left
// idle in the transaction, which would keep every other acquire of the
// lock waiting until the server's idle bound ends it. On a loaded machine
// a client starved between two round trips did just that (2026-11-30).
func TestKindAcquireHoldsNoRowAcrossRoundTrips(t *testing.T) {
	srv, url, b, raw := fastServer(t)
	for _, k := range fastKinds {
		t.Run(k.name, func(t *testing.T) {
			l, err := k.acquire(t.Context(), b) // its state row
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			px, a := viaProxy(t, srv, url)
			px.BlackholeAfter([]byte("FOR UPDATE")) // the server gets the message whole; the client no reply
			actx, acancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				if l, err := k.acquire(actx, a); err == nil {
					t.Errorf("an acquire cut off before its reply returned a lease with token %d", l.Token())
				}
			}()
			defer func() { px.Close(); acancel(); <-done; _ = a.Close() }()
			// Wait until the server has run the cut client's message: its
			// hold is there, committed.
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				info, err := k.inspect(t.Context(), b)
				if err != nil {
					t.Fatal(err)
				}
				if len(info.Holders) == 1 {
					break
				}
				if time.Now().After(deadline) {
					var states string
					_ = raw.QueryRow(t.Context(), `SELECT coalesce(string_agg(state, ', '), '') FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&states)
					t.Fatalf("the cut client's acquire wrote no hold in 20 s (sessions: %s)", states)
				}
			}
			var idleInTx int
			if err := raw.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND state LIKE 'idle in transaction%'`).Scan(&idleInTx); err != nil {
				t.Fatal(err)
			}
			if idleInTx != 0 {
				t.Fatalf("%d sessions idle in a transaction after the cut client's acquire ran", idleInTx)
			}
			k.beside(t, b) // the cut client's grant counts
		})
	}
}

// A read or write request refused in the fast acquire's message keeps its
// place in line, and one granted in it keeps none: its queueing statements
// carry the condition that the owner holds nothing.
func TestFastQueueIsGuarded(t *testing.T) {
	for name, sql := range map[string]string{"queue": pglock.RWQueueSQL, "requeue": pglock.RWRequeueSQL} {
		if !strings.Contains(sql, pglock.OwnHoldSQL) {
			t.Errorf("the %s statement lacks the own-hold condition:\n%s", name, sql)
		}
	}
	_, _, b, raw := fastServer(t)
	waiting := func() (n int) {
		if err := raw.QueryRow(t.Context(), `SELECT count(*) FROM dlock_waits WHERE name = 'fast-queue'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	until := func(want int) {
		for deadline := time.Now().Add(10 * time.Second); waiting() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d waiting records, want %d", waiting(), want)
			}
		}
	}
	rw := func(owner string) *dlock.RWMutex {
		return b.RWMutex("fast-queue", dlock.WithTTL(fastTTL), dlock.WithOwner(owner))
	}
	w, err := rw("writer").Lock(t.Context()) // granted at once: no record
	if err != nil {
		t.Fatal(err)
	}
	if n := waiting(); n != 0 {
		t.Fatalf("a write lock granted at once left %d waiting records", n)
	}
	got := make(chan error, 1)
	go func() {
		l, err := rw("reader").RLock(t.Context()) // refused, queued, then granted
		if err == nil {
			err = l.Unlock(context.Background())
		}
		got <- err
	}()
	until(1)
	if err := w.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	until(0) // the grant took the reader's record with it
}
