package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rowHolds reads the row of name straight from the server: owner, holds (-1: no row).
func rowHolds(t *testing.T, raw *pgxpool.Pool, name string) (string, int64) {
	var owner string
	var holds int64
	err := raw.QueryRow(context.Background(), `SELECT owner, holds FROM dlock_locks WHERE name = $1 AND expires_at > clock_timestamp()`, name).Scan(&owner, &holds)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return owner, holds
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

	var leftover, lost, notPending, errs, doubles int
	for round := range rounds {
		name := fmt.Sprintf("settle-race-%d-%s", round, dlock.NewOwnerID()[:8])
		owner := dlock.NewOwnerID()
		m := a.Mutex(name, dlock.WithTTL(20*time.Second), dlock.WithOwner(owner))
		l1, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := m.Lock(dlock.ContextWithLease(ctx, l1))
		if err != nil {
			t.Fatal(err)
		}
		l3, err := m.Lock(dlock.ContextWithLease(ctx, l1))
		if err != nil {
			t.Fatal(err)
		}
		// L1's release: uncertain, and applied.
		px.SetDelay(6 * time.Millisecond)
		uctx, cancel := context.WithTimeout(ctx, 9*time.Millisecond)
		uerr := l1.Unlock(uctx)
		cancel()
		time.Sleep(20 * time.Millisecond)
		px.SetDelay(0)
		_, h := rowHolds(t, raw, name)
		if uerr == nil || h != 2 {
			notPending++
			t.Logf("round %d: L1 Unlock = %v, row holds %d (want an error, 2)", round, uerr, h)
		}
		// Race L2's Unlock with a nested Lock through L3.
		var l4 *dlock.Lease
		var e2, e4 error
		var wg sync.WaitGroup
		wg.Add(2)
		lead := rand.N(600 * time.Microsecond)
		first := round%2 == 0
		go func() {
			defer wg.Done()
			if !first {
				time.Sleep(lead)
			}
			e2 = l2.Unlock(ctx)
		}()
		go func() {
			defer wg.Done()
			if first {
				time.Sleep(lead)
			}
			if twoReleases {
				e4 = l3.Unlock(ctx)
				l3 = nil
				return
			}
			l4, e4 = m.Lock(dlock.ContextWithLease(ctx, l3))
		}()
		wg.Wait()
		_, hmid := rowHolds(t, raw, name)
		if e2 != nil {
			errs++
			if errors.Is(e2, dlock.ErrLeaseLost) {
				lost++
			}
			t.Logf("round %d: L2 Unlock: %v", round, e2)
		}
		if e4 != nil {
			errs++
			t.Logf("round %d: nested Lock: %v", round, e4)
		}
		if hmid != 2 {
			t.Logf("round %d: after the race the row holds %d; the owner has 2 leases (L3, L4)", round, hmid)
		}
		for i, l := range []*dlock.Lease{l3, l4} {
			if l == nil {
				continue
			}
			if i == 1 && l.Err() == nil { // L4 live: nobody else may get the lock
				if bl, err := b.Mutex(name).TryLock(ctx); err == nil {
					doubles++
					t.Logf("round %d: DOUBLE GRANT: b got token %d while L4 (token %d) is live, err %v", round, bl.Token(), l.Token(), l.Err())
					_ = bl.Unlock(ctx)
				}
			}
			if err := l.Unlock(ctx); err != nil {
				errs++
				if errors.Is(err, dlock.ErrLeaseLost) {
					lost++
				}
				t.Logf("round %d: L%d Unlock: %v (row mid-race holds %d)", round, i+3, err, hmid)
			}
		}
		if o, h := rowHolds(t, raw, name); h != -1 {
			leftover++
			t.Logf("round %d: LEFTOVER row owner %s holds %d after every lease unlocked (mid %d)", round, o[:8], h, hmid)
		} else if l, err := b.Mutex(name).TryLock(ctx); err != nil {
			t.Logf("round %d: b TryLock: %v", round, err)
		} else {
			_ = l.Unlock(ctx)
		}
	}
	t.Logf("rounds %d: leftover %d, lost %d, double grants %d, errs %d, L1 not uncertain-and-applied %d", rounds, leftover, lost, doubles, errs, notPending)
	if leftover+lost+doubles > 0 {
		t.Errorf("leftover rows %d, leases reported lost %d, double grants %d", leftover, lost, doubles)
	}
}
