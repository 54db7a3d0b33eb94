package pglock_test

import (
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
)

// See sqltest.SummedHolds; with n holds of each kind, what the acquire
// reads of the others' holds is one row of n.
func TestKindAcquireReadsSummary(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	const n = 60
	sqltest.SummedHolds(t, open(t, url, pglock.ModeTable), "summary", n, func() {
		conn := connect(t, url)
		for _, fam := range []driver.Kind{driver.Shared, driver.Permit} {
			rows, err := conn.Query(t.Context(), pglock.KindLiveSQL, "summary", int16(fam.Family()), dlock.NewOwnerID())
			sqltest.SummaryOf(t, rows, err, n)
		}
	})
}
