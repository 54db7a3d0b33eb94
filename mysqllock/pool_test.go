package mysqllock_test

import (
	"database/sql"
	"errors"
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
