package mysqllock_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/dlock/dlock/internal/sqltest"
)

// See sqltest.CutMidTransactionFreed: the bound is the session's
// wait_timeout, set to the TTL while the transaction runs. A session caught
// is one whose transaction has locked rows: one that had not kept nobody
// out, and the test passed without testing the bound.
func TestTableCutMidTransactionFreed(t *testing.T) {
	be := sqlBackend(t)
	admin, err := sql.Open("mysql", "root@tcp("+be.Server.Addr()+")/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	sqltest.CutMidTransactionFreed(t, be, func(ctx context.Context) (bool, error) {
		var n int
		err := admin.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX x
JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id
WHERE p.COMMAND = 'Sleep' AND x.trx_started < NOW() - INTERVAL 0.2 SECOND AND x.trx_rows_locked > 0`).Scan(&n)
		return n > 0, err
	})
}
