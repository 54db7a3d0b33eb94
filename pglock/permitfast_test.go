package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

// A permit's acquire locks the semaphore's state row, decides, grants and
// commits in one message: the row is never locked across a client's round
// trip. Cut off right after sending it, the client holds the row from no
// one: the server has granted and committed (the hold lives its TTL, as any
// grant whose reply is lost), and its session is not left idle in the
// transaction, which would keep every other acquire of the semaphore
// waiting until the server's idle bound ends it. On a loaded machine a
// client starved between two round trips did just that (2026-11-30).
func TestPermitAcquireHoldsNoRowAcrossRoundTrips(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	const name, ttl = "permit-one-message", 30 * time.Second
	b := open(t, url, pglock.ModeTable)
	s := b.Semaphore(name, 2, dlock.WithTTL(ttl))
	l, err := s.Acquire(t.Context()) // its state row
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
		if l, err := a.Semaphore(name, 2, dlock.WithTTL(ttl)).Acquire(actx); err == nil {
			t.Errorf("an Acquire cut off before its reply returned a lease with token %d", l.Token())
		}
	}()
	defer func() { px.Close(); acancel(); <-done; _ = a.Close() }()

	raw, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(context.Background())
	// Wait until the server has run the cut client's message: its hold is
	// there, committed.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := s.Inspect(t.Context())
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
	// The cut client's grant counts: one permit is left, and no more.
	l, err = s.TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("the second permit: %v", err)
	}
	defer func() { _ = l.Unlock(context.Background()) }()
	if _, err := b.Semaphore(name, 2, dlock.WithTTL(ttl), dlock.WithOwner("third")).TryAcquire(t.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a third permit of two: %v, want ErrNotAcquired", err)
	}
}
