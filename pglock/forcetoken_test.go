package pglock_test

import (
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
)

// In row and session modes a force unlock naming a token ends a
// connection. A new holder takes the lock before it writes its token row,
// so for a moment the row still named the last holder's token and
// connection: a force naming that token ended the new holder (session
// mode) or, in row mode, the last holder's connection, by then holding
// another lock, or in the pool (finding of an adversary pass). A release
// now clears the row's connection, and the force checks, in its
// statement, that the connection holds the lock. A raw session stands in
// for the new holder in its moment.
func TestForceStaleTokenEndsNothing(t *testing.T) {
	srv := testserver.Postgres(t)
	for _, mode := range []string{"session", "row"} {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			a := drivertest.MustOpen(t, testserver.PostgresURL(srv)+"&mode="+mode)
			l, err := a.Mutex("stale-" + mode).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			shown := l.Token()
			var pl *pglock.Lease
			if !l.As(&pl) || pl.PID == 0 {
				t.Fatal("no backend pid")
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			other, err := a.Mutex("other-" + mode).Lock(ctx) // on the connection the last hold used, likely
			if err != nil {
				t.Fatal(err)
			}
			raw := connect(t, testserver.PostgresURL(srv))
			if mode == "session" {
				_, err = raw.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", "stale-"+mode)
			} else {
				_, err = raw.Exec(ctx, "BEGIN; SELECT name FROM dlock_rows WHERE name = 'stale-row' FOR UPDATE")
			}
			if err != nil {
				t.Fatal(err)
			}
			// Inspect names no token for a holder whose token row is
			// another's (it named the last holder's, and the CLI's force
			// of that token then ended nothing).
			if info, err := a.Inspect(ctx, "stale-"+mode); err != nil || (!info.Held || info.Token != 0 || info.Owner != "") {
				t.Errorf("Inspect of a holder without a token row of its own = %+v, %v; want held, token 0, no owner", info, err)
			}
			if err := a.ForceUnlock(ctx, "stale-"+mode, shown); err != nil {
				t.Fatalf("ForceUnlock with the last holder's token: %v", err)
			}
			time.Sleep(time.Second) // a backend told to end is gone by now
			if _, err := raw.Exec(ctx, "SELECT 1"); err != nil {
				t.Errorf("the lock's new holder was ended by a force naming the last holder's token: %v", err)
			}
			var n int
			if err := raw.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int32(pl.PID)).Scan(&n); err == nil && n == 0 {
				t.Errorf("the last holder's connection (pid %d), back in its pool, was ended by the force", pl.PID)
			}
			if err := other.Err(); err != nil {
				t.Errorf("a lease on another name was ended by the force: %v", err)
			}
			_ = other.Unlock(ctx)
		})
	}
}
