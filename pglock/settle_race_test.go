package pglock_test

import (
	"context"
	"errors"
	"testing"

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
	px := testserver.NewProxy(t, srvAddr)
	p, err := pool(ctx, "postgres://postgres@"+px.Addr()+"/postgres?sslmode=disable", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := pglock.Open(ctx, p, pglock.Options{Mode: pglock.ModeTable, ClosePool: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	b := open(t, url, pglock.ModeTable)
	raw, err := pool(ctx, url, nil)
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
}
