package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
)

// In row and session modes Inspect and a force unlock find the holding
// connection in the lock itself. In row mode they took it from the token
// row, which a holder outside dlock (psql's SELECT ... FOR UPDATE) never
// writes and which, after a holder's crash, names a connection that is
// gone and whose pid PostgreSQL may give to another: Inspect showed such a
// lock free, a force of it ended nothing, and a force naming the crashed
// holder's token ended whichever backend had the pid now.
func TestForceFindsTheHolderInTheLock(t *testing.T) {
	srv := testserver.Postgres(t)
	for _, mode := range []string{"session", "row"} {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			url := testserver.PostgresURL(srv) + "&mode=" + mode
			a := drivertest.MustOpen(t, url)
			name := "outsider-" + mode
			crashed := heldOnce(t, a, name) // the name's row and token row
			holder := connect(t, testserver.PostgresURL(srv))
			var err error
			if mode == "session" {
				_, err = holder.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", name)
			} else {
				if _, err = holder.Exec(ctx, "BEGIN"); err == nil {
					_, err = holder.Exec(ctx, "SELECT name FROM dlock_rows WHERE name = $1 FOR UPDATE", name)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			holderPID := holder.PgConn().PID()

			// The token row names a bystander's connection, as one left by
			// a crashed holder names whichever backend got its pid since.
			bystander := connect(t, testserver.PostgresURL(srv))
			if _, err := bystander.Exec(ctx, "UPDATE dlock_tokens SET holder_pid = $2 WHERE name = $1 AND token = $3",
				name, int32(bystander.PgConn().PID()), int64(crashed)); err != nil {
				t.Fatal(err)
			}

			info, err := a.Inspect(ctx, name)
			if err != nil || !info.Held || info.Token != 0 || !strings.Contains(strings.Join(info.Notes, "; "), fmt.Sprint(holderPID)) {
				t.Fatalf("Inspect of a lock held by pid %d outside dlock = %+v, %v; want held, token 0, a note naming the pid", holderPID, info, err)
			}
			if err := a.ForceUnlock(ctx, name, crashed); err != nil {
				t.Fatalf("ForceUnlock with the crashed holder's token: %v", err)
			}
			time.Sleep(time.Second) // a backend told to end is gone by now
			if _, err := bystander.Exec(ctx, "SELECT 1"); err != nil {
				t.Fatalf("a force naming a crashed holder's token ended the backend its token row named, which held nothing: %v", err)
			}
			if _, err := holder.Exec(ctx, "SELECT 1"); err != nil {
				t.Fatalf("a force naming a token that is not the holder's ended the holder: %v", err)
			}

			if err := a.ForceUnlock(ctx, name); err != nil { // whoever holds it
				t.Fatalf("ForceUnlock: %v", err)
			}
			lockedAfterForce(t, a, name)
			if _, err := holder.Exec(ctx, "SELECT 1"); err == nil {
				t.Fatal("the holder outside dlock still runs after the force")
			}
		})
	}
}

// A row locked FOR UPDATE in a savepoint that was then released has, as
// xmax, the savepoint's transaction id, which pg_locks no longer shows:
// the row is held, and Inspect cannot tell by whom, and says so (it showed
// the lock free). A force finds the holder by waiting for the row itself
// (it ended nothing).
func TestRowLockedInReleasedSavepoint(t *testing.T) {
	srv := testserver.Postgres(t)
	ctx := t.Context()
	a := drivertest.MustOpen(t, testserver.PostgresURL(srv)+"&mode=row")
	const name = "savepoint"
	heldOnce(t, a, name) // the name's row
	holder := connect(t, testserver.PostgresURL(srv))
	for _, q := range []string{"BEGIN", "SAVEPOINT s", "SELECT name FROM dlock_rows WHERE name = '" + name + "' FOR UPDATE", "RELEASE SAVEPOINT s"} {
		if _, err := holder.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := a.Mutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock = %v; want ErrNotAcquired", err)
	}
	info, err := a.Inspect(ctx, name)
	if err != nil || !info.Held || info.Token != 0 || len(info.Notes) == 0 || !strings.Contains(info.Notes[0], "savepoint") {
		t.Fatalf("Inspect = %+v, %v; want held, token 0, a note that the holder cannot be told", info, err)
	}
	if err := a.ForceUnlock(ctx, name); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	lockedAfterForce(t, a, name)
}

// Row mode: a probe of the row (another client's Inspect, a FOR KEY
// SHARE) holds a row lock for a moment, and a FOR UPDATE queued for the
// row waits for it: a force that follows the waiters to what they wait for
// reaches the probe. Probes hold a marker that the force leaves alone.
// Here a probe stays open with a FOR UPDATE waiter queued behind it.
func TestForceSparesProbes(t *testing.T) {
	srv := testserver.Postgres(t)
	ctx := t.Context()
	a := drivertest.MustOpen(t, testserver.PostgresURL(srv)+"&mode=row")
	const name = "probed"
	heldOnce(t, a, name) // the name's row
	probe := connect(t, testserver.PostgresURL(srv))
	if _, err := probe.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var busy bool
	if err := probe.QueryRow(ctx, pglock.RowBusySQL, name).Scan(&busy); err != nil || busy {
		t.Fatalf("probe = %v, %v; want free", busy, err)
	}
	waiter := connect(t, testserver.PostgresURL(srv))
	var werr error
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		if _, werr = waiter.Exec(ctx, "BEGIN"); werr == nil {
			_, werr = waiter.Exec(ctx, "SELECT name FROM dlock_rows WHERE name = $1 FOR UPDATE", name)
		}
	}()
	t.Cleanup(func() { // before the connections close: the probe's end lets the waiter go
		_ = probe.Close(context.Background())
		<-waited
	})
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := probe.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT granted", int32(waiter.PgConn().PID())).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the waiter did not queue for the row")
		}
	}
	// Whoever holds it: nobody but the probe, which the waiter waits for.
	// The force waits for the row until its bound, and gives up.
	if err := a.ForceUnlock(ctx, name); err == nil {
		t.Error("ForceUnlock of a row that only a probe and a waiter hold = nil; want its error that it found nobody to end")
	}
	if _, err := probe.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the force ended a probe of the row: %v", err)
	}
	if _, err := probe.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if <-waited; werr != nil {
		t.Fatalf("the waiter: %v", werr)
	}
}

// heldOnce takes and releases name once, which makes its row (row mode)
// and its token row, and returns the hold's token.
func heldOnce(t *testing.T, c *dlock.Client, name string) uint64 {
	t.Helper()
	l, err := c.Mutex(name).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	return l.Token()
}

// lockedAfterForce locks name within 30 s, as a force has let it go, and
// unlocks it.
func lockedAfterForce(t *testing.T, c *dlock.Client, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock of %q after the force: %v", name, err)
	}
	_ = l.Unlock(t.Context())
}
