package mysqllock_test

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

// openPool opens a client in mode on a *sql.DB of at most n connections.
func openPool(t *testing.T, srv *testserver.Server, mode mysqllock.Mode, n int) (*dlock.Client, error) {
	t.Helper()
	testserver.MariaDBURL(t, srv, "dlock_pool")
	db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/dlock_pool")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(n)
	c, err := mysqllock.Open(t.Context(), db, mysqllock.Options{Mode: mode, CloseDB: true})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, nil
}

// Row mode holds a connection per lock (or wait) and takes the token on
// another: with every connection held, acquires waited for each other's
// until their ctx ended (finding of an adversary pass). Row mode holds at
// most one less than the pool's connections, and refuses a pool of one.
func TestRowPoolRoomForTokens(t *testing.T) {
	srv := testserver.MariaDB(t)
	if _, err := openPool(t, srv, mysqllock.ModeRow, 1); !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Errorf("row mode on a pool of one connection: %v; want ErrInvalidConfig", err)
	}
	a, err := openPool(t, srv, mysqllock.ModeRow, 2)
	if err != nil {
		t.Fatal(err)
	}
	sqltest.LocksOnSmallPool(t, a)
}

// Session mode on a pool whose connections all hold locks: a TryLock of a
// free lock waited for a connection until its ctx ended (finding of an
// adversary pass). It is refused at once for want of a slot.
func TestSessionTryLockBesideFullPool(t *testing.T) {
	srv := testserver.MariaDB(t)
	a, err := openPool(t, srv, mysqllock.ModeSession, 2)
	if err != nil {
		t.Fatal(err)
	}
	sqltest.TryLocksOnFullPool(t, a)
}

// A TryLock bounds its lock waits on the session it runs on (tryWait) and
// puts the session's values back before the connection returns to the
// pool: no pooled connection keeps the bound, after granted and refused
// TryLocks alike, in either mode.
func TestTryLockLeavesPoolSettings(t *testing.T) {
	srv := testserver.MariaDB(t)
	for _, mode := range []mysqllock.Mode{mysqllock.ModeRow, mysqllock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			testserver.MariaDBURL(t, srv, "dlock_settings")
			db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/dlock_settings")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			db.SetMaxOpenConns(3)
			db.SetMaxIdleConns(3)
			a, err := mysqllock.Open(t.Context(), db, mysqllock.Options{Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			ctx := t.Context()
			for i := range 6 {
				name := fmt.Sprintf("settings-%d", i%2)
				l, err := a.Mutex(name, dlock.WithOwner(fmt.Sprintf("owner-%d", i))).TryLock(ctx)
				switch {
				case err == nil:
					defer l.Unlock(ctx) // held to the end: the next TryLock of name is refused
				case !errors.Is(err, dlock.ErrNotAcquired):
					t.Fatalf("TryLock %s: %v", name, err)
				}
			}
			a.Close()
			var want [2]int64
			if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.innodb_lock_wait_timeout, @@GLOBAL.lock_wait_timeout").Scan(&want[0], &want[1]); err != nil {
				t.Fatal(err)
			}
			// Take every connection the pool has, so each one is read.
			var conns []*sql.Conn
			for range 3 {
				c, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns = append(conns, c)
			}
			for i, c := range conns {
				var got [2]int64
				if err := c.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout, @@SESSION.lock_wait_timeout").Scan(&got[0], &got[1]); err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("pooled connection %d keeps lock waits %v, want the defaults %v", i, got, want)
				}
			}
		})
	}
}
