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
			if err != nil {
				t.Fatal(err)
			}
			var got, sum int64
			for rows.Next() {
				var owner string
				var kind int
				var left, count int64
				if err := rows.Scan(&owner, &kind, &left, &count); err != nil {
					t.Fatal(err)
				}
				got, sum = got+1, sum+count
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if got != 1 || sum != n {
				t.Errorf("kind %v: %d rows summing %d holds; want 1 row of %d", fam, got, sum, n)
			}
		}
	})
}
