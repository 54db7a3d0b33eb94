package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

// pglock's TestSettleRaces here (on MariaDB a cancelled statement is not
// applied, but one held in the network still lands).
func TestSettleRaces(t *testing.T) {
	ctx := t.Context()
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	px := testserver.NewProxy(t, srv.Addr())
	db, err := newDB(srv.Addr(), "dlock", func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", px.Addr())
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := mysqllock.Open(ctx, db, mysqllock.Options{Mode: mysqllock.ModeTable, CloseDB: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	b := open(t, url, mysqllock.ModeTable)
	raw, err := newDB(srv.Addr(), "dlock", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	rowHolds := func(name string) int64 {
		var h int64
		err := raw.QueryRow(`SELECT holds FROM dlock_locks WHERE name = ? AND expires_at > UTC_TIMESTAMP(6)`, name).Scan(&h)
		if errors.Is(err, sql.ErrNoRows) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	t.Run("Release", func(t *testing.T) { sqltest.SettleRace(t, a, b, px, rowHolds, false, 30) })
	t.Run("LateRelease", func(t *testing.T) { sqltest.LateReleaseAfterSettle(t, a, b, px, rowHolds, false, 8) })
	t.Run("LateReleaseThenLock", func(t *testing.T) { sqltest.LateReleaseAfterSettle(t, a, b, px, rowHolds, true, 8) })
	t.Run("KeptDropIDs", func(t *testing.T) {
		sqltest.KeptDropIDs(t, b, func(name string) int {
			var released string
			if err := raw.QueryRow(`SELECT released FROM dlock_locks WHERE name = ?`, name).Scan(&released); err != nil {
				t.Fatal(err)
			}
			if len(released)%(1+sqlbase.DropIDLen) != 0 || strings.Count(released, ",") != len(released)/(1+sqlbase.DropIDLen) {
				t.Fatalf("released %q is not whole entries", released)
			}
			return len(released) / (1 + sqlbase.DropIDLen)
		})
	})
	t.Run("SharedOwnerLostReply", func(t *testing.T) { sqltest.SharedOwnerLostReply(t, a, b, px, rowHolds, 6) })
}
