package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rowHolds reads the hold count of name's live row straight from the
// server (-1: no row).
func rowHolds(t *testing.T, raw *pgxpool.Pool, name string) int64 {
	var holds int64
	err := raw.QueryRow(context.Background(), `SELECT holds FROM dlock_locks WHERE name = $1 AND expires_at > clock_timestamp()`, name).Scan(&holds)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return holds
}

// Settles of a fixed owner's pending holds in table mode, against releases
// and re-entries in flight (sqltest.SettleRace) and against a release that
// lands after its settle (sqltest.LateReleaseAfterSettle). Before settles
// ran alone and every release carried its floor, another owner was granted
// beside a live lease, or the row kept a hold nobody released.
func TestSettleRaces(t *testing.T) {
	ctx := t.Context()
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	srvAddr := url[len("postgres://postgres@"):]
	srvAddr = srvAddr[:len(srvAddr)-len("/postgres?sslmode=disable")]
	// via opens a client whose connections go through a proxy of its own,
	// with the URL's extra parameters.
	via := func(params string) (*dlock.Client, *testserver.Proxy) {
		px := testserver.NewProxy(t, srvAddr)
		p, err := pool(ctx, "postgres://postgres@"+px.Addr()+"/postgres?sslmode=disable"+params, nil, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c, err := pglock.Open(ctx, p, pglock.Options{Mode: pglock.ModeTable, ClosePool: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c, px
	}
	a, px := via("")
	b := open(t, url, pglock.ModeTable)
	raw, err := pool(ctx, url, nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	holds := func(name string) int64 { return rowHolds(t, raw, name) }
	t.Run("Release", func(t *testing.T) { sqltest.SettleRace(t, a, b, px, holds, false, 40) })
	t.Run("TwoReleases", func(t *testing.T) { sqltest.SettleRace(t, a, b, px, holds, true, 30) })
	t.Run("LateRelease", func(t *testing.T) { sqltest.LateReleaseAfterSettle(t, a, b, px, holds, false, 8) })
	t.Run("LateReleaseThenLock", func(t *testing.T) { sqltest.LateReleaseAfterSettle(t, a, b, px, holds, true, 8) })
	t.Run("KeptDropIDs", func(t *testing.T) {
		sqltest.KeptDropIDs(t, b, func(name string) int {
			var n int
			if err := raw.QueryRow(ctx, `SELECT cardinality(released) FROM dlock_locks WHERE name = $1`, name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		})
	})
	t.Run("SharedOwnerLostReply", func(t *testing.T) { sqltest.SharedOwnerLostReply(t, a, b, px, holds, 6) })
	t.Run("LateReleaseLeavesNoHold", func(t *testing.T) { sqltest.LateReleaseLeavesNoHold(t, a, b, px, holds, 4) })
	// One round trip a statement (no prepare), so that a deadline of 1.5
	// delays ends each release between its landing and its reply.
	ax, pax := via("&default_query_exec_mode=exec")
	cx, pcx := via("&default_query_exec_mode=exec")
	const d = 60 * time.Millisecond
	t.Run("SharedOwnerIDsFallOff", func(t *testing.T) { sqltest.SharedOwnerIDsFallOff(t, ax, b, cx, pax, pcx, holds, d, 3*d/2, 2) })
	t.Run("SharedOwnerFlakySettles", func(t *testing.T) { sqltest.SharedOwnerFlakySettles(t, ax, b, cx, pax, pcx, holds, d, 3*d/2, 31) })
}
