package mysqllock_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

// As pglock's TestForceStaleTokenEndsNothing: a force naming the last
// holder's token, while a new holder has the lock but has not written its
// token row yet, KILLed the new holder (session mode) or the last holder's
// connection, by then holding another lock (row mode). A raw connection
// stands in for the new holder.
func TestForceStaleTokenEndsNothing(t *testing.T) {
	srv := testserver.MariaDB(t)
	base := testserver.MariaDBURL(t, srv, "dlock_stale")
	for _, mode := range []string{"session", "row"} {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			a := drivertest.MustOpen(t, base+"?mode="+mode)
			name := "stale-" + mode
			l, err := a.Mutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			shown := l.Token()
			var ml *mysqllock.Lease
			if !l.As(&ml) || ml.ConnID == 0 {
				t.Fatal("no connection id")
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			other, err := a.Mutex("other-" + mode).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/dlock_stale")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			raw, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if mode == "session" {
				var got int
				if err := raw.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil || got != 1 {
					t.Fatalf("GET_LOCK: %d, %v", got, err)
				}
			} else {
				if _, err := raw.ExecContext(ctx, "BEGIN"); err != nil {
					t.Fatal(err)
				}
				if _, err := raw.ExecContext(ctx, "SELECT name FROM dlock_rows WHERE name = ? FOR UPDATE", name); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.ForceUnlock(ctx, name, shown); err != nil {
				t.Fatalf("ForceUnlock with the last holder's token: %v", err)
			}
			time.Sleep(time.Second)
			if err := raw.PingContext(ctx); err != nil {
				t.Errorf("the lock's new holder was KILLed by a force naming the last holder's token: %v", err)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", ml.ConnID).Scan(&n); err == nil && n == 0 {
				t.Errorf("the last holder's connection (%d), back in its pool, was KILLed by the force", ml.ConnID)
			}
			if err := other.Err(); err != nil {
				t.Errorf("a lease on another name was ended by the force: %v", err)
			}
			_ = other.Unlock(ctx)
		})
	}
}
