package mysqllock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

// A release that fails while the server is down leaves no hold that the
// owner then re-enters: its next Lock gets a new token, and once it unlocks
// another client gets the lock (issue 15, finding 8).
func TestTableFailedReleaseNotReentered(t *testing.T) {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	ctx := t.Context()
	const ttl = 5 * time.Second
	a := open(t, url, mysqllock.ModeTable)
	m := a.Mutex("failed-release", dlock.WithTTL(ttl))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := l.Token()
	srv.Kill()
	if err := l.Unlock(ctx); err == nil {
		t.Fatal("Unlock succeeded with the server down")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	b := open(t, url, mysqllock.ModeTable)
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l2, err := m.Lock(lctx)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= old {
		t.Fatalf("the owner's next Lock has token %d; the hold whose release failed had %d: it re-entered it", l2.Token(), old)
	}
	info, err := b.Inspect(ctx, "failed-release")
	if err != nil || info.Holds != 1 {
		t.Fatalf("Inspect = %+v, %v; want one hold", info, err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	bctx, cancel2 := context.WithTimeout(ctx, ttl)
	defer cancel2()
	lb, err := b.Mutex("failed-release").Lock(bctx)
	if err != nil {
		t.Fatalf("another client did not get the lock after the owner unlocked: %v", err)
	}
	_ = lb.Unlock(ctx)
}
