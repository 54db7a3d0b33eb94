package pglock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
)

// See sqltest.CutMidTransactionFreed: the bound is
// idle_in_transaction_session_timeout, set to the TTL in the transaction.
// A session caught is one past a statement that locks a row: not past the
// BEGIN alone, nor past the state row's INSERT … DO NOTHING alone (one
// caught there kept nobody out, and the test passed without testing the
// bound). The acquire sends that INSERT in one message with the FOR UPDATE
// that locks the row (oneMessage).
func TestTableCutMidTransactionFreed(t *testing.T) {
	be := sqlBackend(t)
	admin := connect(t, testserver.PostgresURL(be.Server))
	sqltest.CutMidTransactionFreed(t, be, func(ctx context.Context) (bool, error) {
		var caught bool
		err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE state = 'idle in transaction' AND state_change < now() - interval '200 ms'
  AND query NOT ILIKE 'begin%' AND (query NOT LIKE 'INSERT INTO dlock_kinds%' OR query LIKE '%FOR UPDATE%'))`).Scan(&caught)
		return caught, err
	})
}

// A client cut off right after its acquire transaction's BEGIN holds no
// row, but its session sat idle in the transaction for good: the bound was
// set by the next statement, which never came (an adversary stopped a
// client there and found the session still idle 10 s, five TTLs, later).
// The BEGIN now sets it, so the server ends the session after the TTL.
// Each round's client is slow (50 ms each way), and the proxy drops its
// traffic as soon as its session shows idle in a transaction after the
// BEGIN, with the next statement still in the proxy.
func TestTableCutAfterBeginEnded(t *testing.T) {
	be := sqlBackend(t)
	url := be.URL("table")
	admin := connect(t, testserver.PostgresURL(be.Server))
	const ttl = 2 * time.Second
	for try := 0; ; try++ {
		if try == 20 {
			t.Fatal("never caught a session right after its BEGIN")
		}
		px := testserver.NewProxy(t, be.Server.Addr())
		a := drivertest.MustOpen(t, strings.Replace(url, be.Server.Addr(), px.Addr(), 1))
		t.Cleanup(px.Close) // before the client's Close, which would wait on the blackhole
		name := fmt.Sprintf("begin-%d", try)
		px.SetDelay(50 * time.Millisecond)
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		go func() {
			for ctx.Err() == nil {
				if l, err := a.RWMutex(name, dlock.WithTTL(ttl)).Lock(ctx); err == nil {
					_ = l.Unlock(ctx)
				}
			}
		}()
		var pid int32
		for end := time.Now().Add(3 * time.Second); pid == 0 && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			err := admin.QueryRow(t.Context(), `SELECT coalesce((SELECT pid FROM pg_stat_activity
WHERE state = 'idle in transaction' AND query ILIKE 'begin%' LIMIT 1), 0)`).Scan(&pid)
			if err != nil {
				t.Fatal(err)
			}
		}
		if pid == 0 {
			cancel()
			continue
		}
		px.Blackhole()
		// Still there after the BEGIN? (The next statement may have got in.)
		var query string
		if err := admin.QueryRow(t.Context(), `SELECT coalesce((SELECT query FROM pg_stat_activity WHERE pid = $1 AND state = 'idle in transaction'), '')`, pid).Scan(&query); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(strings.ToUpper(query), "BEGIN") {
			cancel()
			continue
		}
		t.Logf("caught backend %d idle after its BEGIN on try %d", pid, try+1)
		// Room for a loaded machine: the bound is the TTL.
		start := time.Now()
		for end := start.Add(ttl + 13*time.Second); ; time.Sleep(50 * time.Millisecond) {
			var alive bool
			if err := admin.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive); err != nil {
				t.Fatal(err)
			}
			if !alive {
				t.Logf("the server ended it %v after the cut", time.Since(start).Round(time.Millisecond))
				return
			}
			if time.Now().After(end) {
				t.Fatalf("the session cut off after its BEGIN is still there %v later (TTL %v)", ttl+13*time.Second, ttl)
			}
		}
	}
}
