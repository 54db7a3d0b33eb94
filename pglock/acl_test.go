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
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
)

// superExec runs statements as the superuser.
func superExec(t *testing.T, srv *testserver.Server, stmts ...string) {
	t.Helper()
	conn := connect(t, testserver.PostgresURL(srv))
	for _, s := range stmts {
		if _, err := conn.Exec(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func roleURL(srv *testserver.Server, role, query string) string {
	return fmt.Sprintf("postgres://%s:pw@%s/postgres?sslmode=disable%s", role, srv.Addr(), query)
}

// grantTenant runs the doc's block for tenant s (schema s, roles s_owner
// and s_worker): the owner migrates where the doc says to, as `dlock
// migrate` does. It returns the worker's URL.
func grantTenant(t *testing.T, srv *testserver.Server, s string) string {
	t.Helper()
	r := strings.NewReplacer("dlock_owner", s+"_owner", "dlock_worker", s+"_worker", "SCHEMA dlock ", "SCHEMA "+s+" ",
		"search_path = dlock;", "search_path = "+s+";", "dlock.dlock_", s+".dlock_")
	sqltest.GrantTenant(t, "pglock.go", r, func(stmt string) { superExec(t, srv, stmt) }, roleURL(srv, s+"_owner", ""))
	return roleURL(srv, s+"_worker", "")
}

// LeastPrivilege gives the suite clients of a worker with exactly the
// package doc's grant on tables an owner made, in h's mode
// (drivertest.ACLHarness).
func (h *harness) LeastPrivilege(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
	return &harness{url: grantTenant(t, h.srv, "lp"+string(h.mode)), mode: h.mode}, nil
}

// TestMissingRight: a worker cannot make the tables (Open says which right
// it lacks and makes nothing), and one without the table grants fails Lock
// at once, naming the table, instead of waiting out its ctx.
func TestMissingRight(t *testing.T) {
	srv := testserver.Postgres(t)
	ctx := t.Context()
	superExec(t, srv, "CREATE ROLE bare LOGIN", "CREATE SCHEMA bare", "GRANT USAGE ON SCHEMA bare TO bare",
		"ALTER ROLE bare SET search_path = bare")
	_, err := dlock.Open(ctx, roleURL(srv, "bare", ""))
	if err == nil || !strings.Contains(err.Error(), "permission denied for schema bare") || !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Fatalf("Open by a worker with no tables: %v; want the schema's CREATE named", err)
	}
	// The superuser makes the tables; bare still has no grant on them.
	c, err := dlock.Open(ctx, testserver.PostgresURL(srv)+"&search_path=bare") // the superuser migrates bare
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	for mode, want := range map[string]string{
		"table":   "table mode needs SELECT on dlock_locks, INSERT on dlock_locks, UPDATE on dlock_locks, DELETE on dlock_locks, SELECT on dlock_tokens",
		"session": "session mode needs SELECT on dlock_tokens, INSERT on dlock_tokens, UPDATE on dlock_tokens",
	} {
		_, err := dlock.Open(ctx, roleURL(srv, "bare", "&mode="+mode))
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, dlock.ErrInvalidConfig) {
			t.Errorf("%s mode: Open without table grants: %v; want the privileges named", mode, err)
		}
	}
	// With the grant but DELETE, Open names DELETE; a Lock by an older
	// client that opened meanwhile fails at once, naming the table.
	superExec(t, srv, "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA bare TO bare")
	if _, err := dlock.Open(ctx, roleURL(srv, "bare", "")); err == nil || !strings.Contains(err.Error(), "needs DELETE on dlock_locks (") {
		t.Errorf("Open without DELETE: %v; want DELETE named", err)
	}
	w := drivertest.MustOpen(t, roleURL(srv, "bare", "&mode=session"))
	superExec(t, srv, "REVOKE INSERT ON bare.dlock_tokens FROM bare")
	drivertest.WantLockRefused(t, w, "acl/x", "permission denied for table dlock_tokens")
}

// TestTenantsApart: tenants a and b, each with the doc's schema, owner and
// worker. b's worker cannot take, release, overwrite or force-release a's
// locks; force-releasing a's session lock needs pg_signal_backend, which an
// operator role has and workers do not.
func TestTenantsApart(t *testing.T) {
	srv := testserver.Postgres(t)
	ctx := t.Context()
	aURL := grantTenant(t, srv, "a")
	grantTenant(t, srv, "b")
	a := drivertest.MustOpen(t, aURL)
	la, err := a.Mutex("x", dlock.WithTTL(5*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Unlock(ctx)
	// b's worker pointed at a's schema.
	if _, err := dlock.Open(ctx, roleURL(srv, "b_worker", "&search_path=a")); err == nil || !strings.Contains(err.Error(), "no schema in the user's search_path that it may use") {
		t.Errorf("Open of a's schema by b's worker: %v; want permission denied", err)
	}
	bconn := connect(t, roleURL(srv, "b_worker", ""))
	for _, q := range []string{"DELETE FROM a.dlock_locks", "UPDATE a.dlock_locks SET owner = 'b'",
		"INSERT INTO a.dlock_tokens (name, token) VALUES ('x', 1000)", "SELECT * FROM a.dlock_locks"} {
		if _, err := bconn.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "permission denied for schema a") {
			t.Errorf("%s by b's worker: %v; want permission denied", q, err)
		}
	}
	drivertest.WantKept(t, a, la, "x", 5*time.Second)
	b := drivertest.MustOpen(t, roleURL(srv, "b_worker", ""))
	lb, err := b.Mutex("x").TryLock(ctx) // b's own x, in b's schema
	if err != nil {
		t.Fatalf("b's own lock: %v", err)
	}
	_ = lb.Unlock(ctx)

	// Session mode: a's worker holds y; b's worker finds the holder (advisory
	// locks are per database) but may not end its connection.
	sqltest.SessionForceUnlock(t, drivertest.MustOpen(t, aURL+"&mode=session"), drivertest.MustOpen(t, roleURL(srv, "b_worker", "&mode=session")),
		"pg_signal_backend", func() *dlock.Client {
			superExec(t, srv, "CREATE ROLE ops LOGIN", "GRANT a_worker, pg_signal_backend TO ops", "ALTER ROLE ops SET search_path = a")
			return drivertest.MustOpen(t, roleURL(srv, "ops", "&mode=session"))
		})
}
