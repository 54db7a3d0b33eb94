package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
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
	// via opens a client whose connections go through a proxy of its own.
	via := func() (*dlock.Client, *testserver.Proxy) {
		px := testserver.NewProxy(t, srv.Addr())
		db, err := newDB(srv.Addr(), "dlock", func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", px.Addr())
		})
		if err != nil {
			t.Fatal(err)
		}
		c, err := mysqllock.Open(ctx, db, mysqllock.Options{Mode: mysqllock.ModeTable, CloseDB: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c, px
	}
	a, px := via()
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
	t.Run("LateReleaseLeavesNoHold", func(t *testing.T) { sqltest.LateReleaseLeavesNoHold(t, a, b, px, rowHolds, 4) })
	// A statement is a prepare and an execute: a deadline of 3.5 delays
	// ends each release between its landing and its reply.
	c, pc := via()
	const d = 40 * time.Millisecond
	t.Run("SharedOwnerIDsFallOff", func(t *testing.T) { sqltest.SharedOwnerIDsFallOff(t, a, b, c, px, pc, rowHolds, d, 7*d/2, 2) })
	t.Run("SharedOwnerFlakySettles", func(t *testing.T) { sqltest.SharedOwnerFlakySettles(t, a, b, c, px, pc, rowHolds, d, 7*d/2, 31) })
}
