package mysqllock_test

import (
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

// BenchmarkTableUncontended compares table mode's Lock+Unlock with running
// its two statements (acquire, release) bare through database/sql.
func BenchmarkTableUncontended(b *testing.B) {
	srv := testserver.MariaDB(b)
	testserver.MariaDBURL(b, srv, "dlock")
	h := &harness{addr: srv.Addr(), mode: mysqllock.ModeTable}
	b.Run("dlock", func(b *testing.B) {
		drivertest.LockUnlock(b, drivertest.Client(b, h), "bench/u/dlock")
	})
	b.Run("statements", func(b *testing.B) {
		db, err := newDB(srv.Addr(), "dlock", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		ctx, owner, ttl := b.Context(), dlock.NewOwnerID(), (30 * time.Second).Microseconds()
		for b.Loop() {
			res, err := db.ExecContext(ctx, mysqllock.AcquireSQL, "bench/u/statements", owner, ttl, "")
			if err != nil {
				b.Fatal(err)
			}
			token, _ := res.LastInsertId()
			if token == 0 {
				b.Fatal("not granted")
			}
			q, args := mysqllock.ReleaseQuery(sqlbase.Settle{Token: uint64(token), Drops: []sqlbase.Drop{{ID: "0123456789abcdef", Count: 1}}}, "bench/u/statements", owner)
			if _, err := db.ExecContext(ctx, q, args...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkContended: 16 contenders, each its own client, on one name in
// each mode, holding it 1 ms, for 3 s.
func BenchmarkContended(b *testing.B) {
	srv := testserver.MariaDB(b)
	testserver.MariaDBURL(b, srv, "dlock")
	for _, mode := range []mysqllock.Mode{mysqllock.ModeTable, mysqllock.ModeRow, mysqllock.ModeSession} {
		b.Run(string(mode), func(b *testing.B) {
			h := &harness{addr: srv.Addr(), mode: mode}
			drivertest.ContendClients(b, h.NewClient, 16, 3*time.Second)
		})
	}
}
