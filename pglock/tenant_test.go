package pglock_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/jackc/pgx/v5"
)

// TestTenantAttacks: tenants a and b set up exactly as the package doc
// says, in one database. Through pgx, b's worker finds a's release channel
// (table OIDs are public, and PostgreSQL checks no privilege on LISTEN or
// NOTIFY) and listens there: a's release of a lock arrives without its name
// (md5 of it); b's own channel hears nothing of a's releases. b's
// notifications on a's channel, even one with the right payload, wake a's
// waiter for nothing: it stays waiting, and a's holder keeps its lock. And
// b can neither read a's names nor take, release or keep alive a's locks.
func TestTenantAttacks(t *testing.T) {
	srv := testserver.Postgres(t)
	ctx := t.Context()
	aURL := grantTenant(t, srv, "a")
	grantTenant(t, srv, "b")
	a := drivertest.MustOpen(t, aURL)
	const secret = "tenantA/secret-project-name"

	bconn := connect(t, roleURL(srv, "b_worker", ""))
	var aChannel, bChannel string
	if err := bconn.QueryRow(ctx, `SELECT 'dlock_release_' || c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname = 'dlock_locks' AND n.nspname = 'a'`).Scan(&aChannel); err != nil {
		t.Fatalf("b finds a's channel: %v", err)
	}
	if err := bconn.QueryRow(ctx, `SELECT 'dlock_release_' || 'dlock_locks'::regclass::oid::text`).Scan(&bChannel); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"dlock_release", aChannel, bChannel} {
		if _, err := bconn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	// a takes and releases its lock: b hears it on a's channel only, hashed.
	l, err := a.Mutex(secret).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	n, err := bconn.WaitForNotification(nctx)
	cancel()
	if err != nil {
		t.Fatalf("b heard nothing on a's channel: %v", err)
	}
	sum := md5.Sum([]byte(secret))
	if n.Channel != aChannel || strings.Contains(n.Payload, "secret") || n.Payload != hex.EncodeToString(sum[:]) {
		t.Fatalf("b heard %q on %q; want md5 of the name, on a's channel %q only", n.Payload, n.Channel, aChannel)
	}
	nctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	if n, err := bconn.WaitForNotification(nctx); err == nil {
		t.Fatalf("b heard %q on %q too; want a's release on a's channel once", n.Payload, n.Channel)
	}
	cancel()

	// a holds; a's waiter queues. b's notifications wake it for nothing.
	la, err := a.Mutex(secret, dlock.WithTTL(10*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Unlock(context.WithoutCancel(ctx))
	waiter := drivertest.StartWaiter(t, a.Mutex(secret))
	for range 20 {
		for _, p := range []string{n.Payload, secret, "x"} {
			if _, err := bconn.Exec(ctx, "SELECT pg_notify($1, $2)", aChannel, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, q := range []string{"SELECT name FROM a.dlock_locks", "DELETE FROM a.dlock_locks",
		"UPDATE a.dlock_locks SET expires_at = expires_at + interval '1 hour'",
		"INSERT INTO a.dlock_locks (name, owner, token, holds, expires_at) VALUES ('y', 'b', 1, 1, now())"} {
		if _, err := bconn.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s by b's worker: %v; want permission denied", q, err)
		}
	}
	if err := la.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("a's lease after b's notifications: %v", err)
	}
	info, err := a.Inspect(ctx, secret)
	if err != nil || !info.Held || info.Token != la.Token() {
		t.Fatalf("a's lock after b's notifications: %+v, %v", info, err)
	}
	waiter.Stop(t)

	// Session mode: the limits docs/security.md lists. Advisory locks are per
	// database: b sees a's held key in pg_locks (a guessed name can be
	// confirmed) and cannot take it while a holds it, nor release it.
	as := drivertest.MustOpen(t, aURL+"&mode=session")
	ls, err := as.Mutex("s/secret").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Unlock(context.WithoutCancel(ctx))
	var seen, took, released bool
	if err := bconn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
  AND ((classid::bigint << 32) | objid::bigint) = hashtextextended('s/secret', 0))`).Scan(&seen); err != nil || !seen {
		t.Errorf("b finds a's advisory key in pg_locks: %v %v; the docs say it can", seen, err)
	}
	if err := bconn.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtextextended('s/secret', 0))").Scan(&took); err != nil || took {
		t.Errorf("b took a's held advisory lock: %v %v", took, err)
	}
	if err := bconn.QueryRow(ctx, "SELECT pg_advisory_unlock(hashtextextended('s/secret', 0))").Scan(&released); err != nil || released {
		t.Errorf("b released a's advisory lock: %v %v", released, err)
	}
	if err := ls.Extend(ctx, 5*time.Second); err != nil {
		t.Fatalf("a's session lease after b's attempts: %v", err)
	}
}

// TestForceUnlockByMembership: an operator role that is a member of a's
// worker role, and nothing more (no pg_signal_backend), may end a's
// session-mode holder; b's worker may not, and the error names both ways.
func TestForceUnlockByMembership(t *testing.T) {
	srv := testserver.Postgres(t)
	aURL := grantTenant(t, srv, "a")
	grantTenant(t, srv, "b")
	sqltest.SessionForceUnlock(t, drivertest.MustOpen(t, aURL+"&mode=session"), drivertest.MustOpen(t, roleURL(srv, "b_worker", "&mode=session")),
		"membership in the holder's role", func() *dlock.Client {
			superExec(t, srv, "CREATE ROLE ops LOGIN", "GRANT a_worker TO ops", "ALTER ROLE ops SET search_path = a")
			return drivertest.MustOpen(t, roleURL(srv, "ops", "&mode=session"))
		})
}
