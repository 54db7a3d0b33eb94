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

// An owner with three nested leases (L1, L2, L3) has L1's release fail
// uncertainly (its reply comes after the Unlock's deadline, though the
// statement is applied), so one hold is pending. Then L2's Unlock, which
// settles the pending hold with its own, races a nested Lock through L3,
// whose acquire settles the pending hold first (or, with twoReleases, L3's
// Unlock, which settles it too). Both settled the same pending hold, or
// counted the other's hold in their floor: the row ended one below the
// owner's leases (another owner was granted beside L4, whose Unlock then
// said lease lost) or one above (a hold nobody releases). Settles now run
// alone on their (name, owner). The row must end gone, with no Unlock
// reporting its lease lost and no double grant.
func TestSettleRacesRelease(t *testing.T) {
	srv := testserver.Postgres(t)
	settleRace(t, testserver.PostgresURL(srv), false, 40)
}

func TestSettleRacesTwoReleases(t *testing.T) {
	srv := testserver.Postgres(t)
	settleRace(t, testserver.PostgresURL(srv), true, 30)
}

func settleRace(t *testing.T, url string, twoReleases bool, rounds int) {
	ctx := t.Context()
	srvAddr := url[len("postgres://postgres@"):]
	srvAddr = srvAddr[:len(srvAddr)-len("/postgres?sslmode=disable")]
	px := testserver.NewProxy(t, srvAddr)
	pxURL := "postgres://postgres@" + px.Addr() + "/postgres?sslmode=disable"
	p, err := pool(ctx, pxURL, nil)
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
	sqltest.SettleRace(t, a, b, px, func(name string) int64 { return rowHolds(t, raw, name) }, twoReleases, rounds)
}
