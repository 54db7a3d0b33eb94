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

// A read-write acquire in table mode sends its transaction's statements
// after the BEGIN as one pipeline. Cut off in the middle of it, after the
// statement that locks the lock's state row, the session has the row
// locked and waits for the rest: the lock is free again for others once
// the server has ended that session, which it does at the transaction's
// idle bound (a TTL) because each statement is followed by a Sync. With a
// single Sync at the pipeline's end the session waited as active, not
// idle, for as long as the connection looked alive, and with it every
// acquire of the lock.
func TestKindAcquireCutMidPipeline(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	const ttl = 2 * time.Second
	b := open(t, url, pglock.ModeTable)
	l, err := b.RWMutex("mid-pipeline").Lock(t.Context()) // its state row
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	px := testserver.NewProxy(t, srv.Addr())
	a, err := dlock.Open(t.Context(), strings.Replace(url, srv.Addr(), px.Addr(), 1)+"&mode=table")
	if err != nil {
		t.Fatal(err)
	}
	// Inside the statement after the state row's lock and its Sync.
	px.BlackholeAt([]byte("DELETE FROM dlock_holds WHERE name = $1"))
	actx, acancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if l, err := a.RWMutex("mid-pipeline", dlock.WithTTL(ttl)).RLock(actx); err == nil {
			t.Errorf("an RLock cut off in its first round trip returned a lease with token %d", l.Token())
		}
	}()
	defer func() { px.Close(); acancel(); <-done; _ = a.Close() }()
	for !px.Blackholed() {
		select {
		case <-done:
			t.Fatal("the RLock returned before its pipeline was cut")
		case <-time.After(10 * time.Millisecond):
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*ttl)
	defer cancel()
	l, err = b.RWMutex("mid-pipeline").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after another client's acquire was cut off holding the state row: %v", err)
	}
	_ = l.Unlock(t.Context())
}
