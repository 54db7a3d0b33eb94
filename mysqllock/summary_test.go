package mysqllock_test

import (
	"database/sql"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/mysqllock"
)

// See sqltest.SummedHolds; with n holds of each kind, what the acquire
// reads of the others' holds is one row of n.
func TestKindAcquireReadsSummary(t *testing.T) {
	be := sqlBackend(t)
	const n = 60
	sqltest.SummedHolds(t, drivertest.MustOpen(t, be.URL("table")), "summary", n, func() {
		db, err := sql.Open("mysql", "root@tcp("+be.Server.Addr()+")/dlock")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, fam := range []driver.Kind{driver.Shared, driver.Permit} {
			me := dlock.NewOwnerID()
			rows, err := db.QueryContext(t.Context(), mysqllock.KindLiveSQL, "summary", fam.Family(), me, "summary", fam.Family(), me)
			sqltest.SummaryOf(t, rows, err, n)
			if rows != nil {
				_ = rows.Close()
			}
		}
	})
}
