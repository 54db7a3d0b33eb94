package mysqllock_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TestTenantAttacks: tenants a and b with the package doc's databases and
// users on one server. Through database/sql, b's worker can neither read
// a's names, take, release nor keep alive a's table-mode locks, nor end
// a's session-mode holder (KILL). The limits docs/security.md lists for
// session mode hold as written: GET_LOCK names are server-wide, so b can
// test whether a name it guesses is held (IS_USED_LOCK), and can hold a
// name first to block a; it never releases a's.
func TestTenantAttacks(t *testing.T) {
	srv := testserver.MariaDB(t)
	ctx := t.Context()
	aURL := grantTenant(t, srv, "a")
	grantTenant(t, srv, "b")
	a := drivertest.MustOpen(t, aURL)
	const name = "tenantA/secret"
	la, err := a.Mutex(name, dlock.WithTTL(5*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Unlock(ctx)
	bdb, err := sql.Open("mysql", "b_worker:pw@tcp("+srv.Addr()+")/b")
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	bdb.SetMaxOpenConns(1)
	for what, q := range map[string]string{
		"read names": "SELECT name FROM a.dlock_locks",
		"take":       "INSERT INTO a.dlock_locks (name, owner, token, holds, expires_at) VALUES ('y', 'b', 1, 1, UTC_TIMESTAMP(6))",
		"release":    "DELETE FROM a.dlock_locks",
		"keep alive": "UPDATE a.dlock_locks SET expires_at = expires_at + INTERVAL 1 HOUR",
	} {
		if _, err := bdb.ExecContext(ctx, q); err == nil || !strings.Contains(err.Error(), "denied") {
			t.Errorf("%s: %s by b's worker: %v; want denied", what, q, err)
		}
	}
	drivertest.WantKept(t, a, la, name, 5*time.Second)

	// Session mode: a's holder is a connection holding GET_LOCK.
	as := drivertest.MustOpen(t, aURL+"?mode=session")
	ls, err := as.Mutex("s/secret").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Unlock(ctx)
	var holder sql.NullInt64
	if err := bdb.QueryRowContext(ctx, "SELECT IS_USED_LOCK('s/secret')").Scan(&holder); err != nil || !holder.Valid {
		t.Fatalf("IS_USED_LOCK of a guessed name by b: %v %v; the docs say b can probe it", holder, err)
	}
	if _, err := bdb.ExecContext(ctx, "KILL ?", holder.Int64); err == nil {
		t.Fatal("b's worker ended a's holder's connection")
	}
	var released sql.NullInt64
	if err := bdb.QueryRowContext(ctx, "SELECT RELEASE_LOCK('s/secret')").Scan(&released); err != nil || released.Int64 == 1 {
		t.Fatalf("RELEASE_LOCK of a's name by b: %v %v; want 0 (not b's)", released, err)
	}
	if err := ls.Extend(ctx, 5*time.Second); err != nil {
		t.Fatalf("a's session lease after b's attempts: %v", err)
	}
	select {
	case <-ls.Done():
		t.Fatalf("a's session lease lost: %v", ls.Err())
	default:
	}
}
