package pglock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
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
			// A dlock hold first, so the name has its row and token row.
			l, err := a.Mutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			crashed := l.Token()
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			holder := connect(t, testserver.PostgresURL(srv))
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
			lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			l, err = a.Mutex(name).Lock(lctx)
			if err != nil {
				t.Fatalf("Lock after a force of the holder outside dlock: %v", err)
			}
			_ = l.Unlock(ctx)
			if _, err := holder.Exec(ctx, "SELECT 1"); err == nil {
				t.Fatal("the holder outside dlock still runs after the force")
			}
		})
	}
}
