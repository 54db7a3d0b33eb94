package pglock_test

import (
	"context"
	"testing"

	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
)

// See sqltest.CutMidTransactionFreed: the bound is
// idle_in_transaction_session_timeout, set to the TTL in the transaction.
func TestTableCutMidTransactionFreed(t *testing.T) {
	be := sqlBackend(t)
	admin := connect(t, testserver.PostgresURL(be.Server))
	sqltest.CutMidTransactionFreed(t, be, func(ctx context.Context) (bool, error) {
		var caught bool
		err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE state = 'idle in transaction' AND state_change < now() - interval '200 ms')`).Scan(&caught)
		return caught, err
	})
}
