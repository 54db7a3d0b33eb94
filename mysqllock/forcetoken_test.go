package mysqllock_test

import (
	"database/sql"
	"strings"
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
			// Inspect names no token for a holder whose token row is
			// another's (as pglock's test).
			if info, err := a.Inspect(ctx, name); err != nil || mode == "session" && (!info.Held || info.Token != 0 || info.Owner != "") {
				t.Errorf("Inspect of a holder without a token row of its own = %+v, %v; want held, token 0, no owner", info, err)
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

// The force's check and its KILL are two statements. A holder that
// released between them, and took a new hold on the same pooled
// connection, had that new hold KILLed (finding of an adversary pass,
// 3 of 3). The force now keeps the token row locked from the check to the
// KILL, and a release clears the row first: it waits, and the force ends
// the hold it named, or none. The forcer's round trips are slowed so that
// the holder's release and new Lock fall between the old code's two
// statements; the holder has one connection, so its new hold is on it.
func TestForceTokenWindowEndsOnlyThatHold(t *testing.T) {
	srv := testserver.MariaDB(t)
	base := testserver.MariaDBURL(t, srv, "dlock_window")
	ctx := t.Context()
	const d = 200 * time.Millisecond
	px := testserver.NewProxy(t, srv.Addr())
	db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/dlock_window?parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	a, err := mysqllock.Open(ctx, db, mysqllock.Options{Mode: mysqllock.ModeSession, CloseDB: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	op := drivertest.MustOpen(t, strings.Replace(base, srv.Addr(), px.Addr(), 1)+"?mode=session")
	const name = "window"
	if _, err := op.Inspect(ctx, name); err != nil { // op's connection is up before the delay
		t.Fatal(err)
	}
	l, err := a.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	px.SetDelay(d)
	forced := make(chan error, 1)
	go func() { forced <- op.ForceUnlock(ctx, name, l.Token()) }()
	time.Sleep(4 * d) // the old code's check (prepared, then run) has run; its KILL is on its way
	_ = l.Unlock(ctx) // before the KILL, or ended by it: either way the named hold ends
	next, err := a.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-forced; err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	px.SetDelay(0)
	time.Sleep(time.Second)
	if next.Token() == l.Token() || next.Err() != nil {
		t.Fatalf("the hold after the one named (token %d, named %d) was ended by the force: %v", next.Token(), l.Token(), next.Err())
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the hold after the one named: %v", err)
	}
}
