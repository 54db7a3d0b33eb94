package mysqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

// A table-mode client cut off between two statements of a read-write
// lock's acquire transaction, which locks the lock's state row, keeps no
// other client out for long: the session's wait_timeout, set to the TTL
// for the transaction, has the server end it. It used to keep the row
// locked, and every other client of the lock waiting, for the session's
// wait_timeout (eight hours by default).
func TestTableCutMidTransactionFreed(t *testing.T) {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock") + "?mode=" + string(mysqllock.ModeTable)
	admin, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	b := drivertest.MustOpen(t, url)
	const ttl = 2 * time.Second
	for try := 0; ; try++ {
		if try == 40 {
			t.Fatal("never caught the client between two statements of a transaction")
		}
		name := fmt.Sprintf("midtx-%d", try)
		px := testserver.NewProxy(t, srv.Addr())
		a := drivertest.MustOpen(t, strings.Replace(url, srv.Addr(), px.Addr(), 1))
		t.Cleanup(px.Close) // before the client's Close: no cleanup waits on the blackhole
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		go func() { // most of a Lock and Unlock's time is in the acquire's transaction
			for ctx.Err() == nil {
				if l, err := a.RWMutex(name, dlock.WithTTL(ttl)).Lock(ctx); err == nil {
					_ = l.Unlock(ctx)
				}
			}
		}()
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		px.Blackhole()
		time.Sleep(300 * time.Millisecond)
		// b has not begun: a connection idle in a transaction is a's.
		var n int
		if err := admin.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM information_schema.INNODB_TRX x
JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id
WHERE p.COMMAND = 'Sleep' AND x.trx_started < NOW() - INTERVAL 0.2 SECOND`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			continue
		}
		t.Logf("caught the client in a transaction on try %d", try+1)
		// Room for a loaded machine: the bound is the TTL.
		lctx, lcancel := context.WithTimeout(t.Context(), ttl+13*time.Second)
		defer lcancel()
		start := time.Now()
		l, err := b.RWMutex(name, dlock.WithTTL(ttl)).Lock(lctx)
		if err != nil {
			t.Fatalf("another client's write Lock while the cut-off one is in its transaction: %v after %v", err, time.Since(start))
		}
		t.Logf("another client locked %v after the check", time.Since(start).Round(time.Millisecond))
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		return
	}
}
