package pglock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
)

// A read-write acquire in table mode sends the statements that lock the
// lock's state row and read its holds, after its BEGIN, at once. Cut off
// while sending them, right after the statement that locks the row (and,
// were they an extended-protocol pipeline, before that statement's Sync),
// the client leaves the lock to others: a message the server never got
// whole ran none of it, and the session, idle in the transaction, ends at
// its bound (a TTL). As a pipeline with a Sync after each statement, the
// server had run the lock's statement and waited for the Sync, active
// rather than idle, with the row locked, for as long as the connection
// looked alive: every other acquire of the lock waited out its ctx
// (finding of an adversary pass).
func TestKindAcquireCutMidMessage(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	const ttl = 2 * time.Second
	b := open(t, url, pglock.ModeTable)
	l, err := b.RWMutex("mid-message").Lock(t.Context()) // its state row
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	px, a := viaProxy(t, srv, url)
	// After the lock's statement; before its Sync, in a pipeline.
	px.BlackholeAt([]byte("FOR UPDATE"), []byte{'S', 0, 0, 0, 4})
	actx, acancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if l, err := a.RWMutex("mid-message", dlock.WithTTL(ttl)).RLock(actx); err == nil {
			t.Errorf("an RLock cut off in its first round trip returned a lease with token %d", l.Token())
		}
	}()
	defer func() { px.Close(); acancel(); <-done; _ = a.Close() }()
	for !px.Blackholed() {
		select {
		case <-done:
			t.Fatal("the RLock returned before it was cut off")
		case <-time.After(10 * time.Millisecond):
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*ttl)
	defer cancel()
	l, err = b.RWMutex("mid-message").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after another client's acquire was cut off holding the state row: %v", err)
	}
	_ = l.Unlock(t.Context())
}

// viaProxy opens a table-mode client of srv (url) through a proxy of its
// own, which the test may cut.
func viaProxy(t *testing.T, srv *testserver.Server, url string) (*testserver.Proxy, *dlock.Client) {
	t.Helper()
	px := testserver.NewProxy(t, srv.Addr())
	a, err := dlock.Open(t.Context(), strings.Replace(url, srv.Addr(), px.Addr(), 1)+"&mode=table")
	if err != nil {
		t.Fatal(err)
	}
	return px, a
}
