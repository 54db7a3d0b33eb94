package pglock_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

func open(t *testing.T, url string, mode pglock.Mode) *dlock.Client {
	t.Helper()
	return drivertest.MustOpen(t, url+"&mode="+string(mode))
}

// sqlBackend starts a server for the tests shared through sqltest.
func sqlBackend(t *testing.T) sqltest.Backend {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	return sqltest.Backend{Server: srv, URL: func(mode string) string { return url + "&mode=" + mode }}
}

// Killing the holder's backend ends its row or session lock: the holder is
// told at its next renewal and a waiter takes the lock.
func TestKilledHolder(t *testing.T) {
	be := sqlBackend(t)
	sqltest.KilledHolder(t, be, func(ctx context.Context, t *testing.T, l *dlock.Lease) {
		var pl *pglock.Lease
		if !l.As(&pl) || pl.PID == 0 {
			t.Fatal("Lease.As(*pglock.Lease) gave no backend pid")
		}
		admin := connect(t, testserver.PostgresURL(be.Server))
		if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", int32(pl.PID)); err != nil {
			t.Fatal(err)
		}
	})
}

// In table mode a dead holder's row is taken over once it expires.
func TestTableTakeOverAfterExpiry(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	a, b := open(t, url, pglock.ModeTable), open(t, url, pglock.ModeTable)
	ctx := t.Context()
	if _, err := a.Mutex("expire", dlock.WithTTL(400*time.Millisecond), dlock.WithoutRenewal()).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l, err := b.Mutex("expire").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if d := time.Since(start); d < 300*time.Millisecond || d > 2*time.Second {
		t.Fatalf("took over after %v; want about the 400ms TTL", d)
	}
	if l.Token() != 2 {
		t.Fatalf("token %d; want 2", l.Token())
	}
}

// A plain SQL user's pg_advisory_lock (from psql) and dlock's session mode
// exclude each other.
func TestPsqlAdvisoryInterop(t *testing.T) {
	psql := testserver.LookBinary(t, "psql")
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	c := open(t, url, pglock.ModeSession)
	ctx := t.Context()
	cmd := exec.CommandContext(ctx, psql, url, "-v", "ON_ERROR_STOP=1", "-c",
		"SELECT pg_advisory_lock(hashtextextended('orders/sku-42', 0))", "-c", "SELECT pg_sleep(2)")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sqltest.ForeignHolderExcludes(t, c, "orders/sku-42", cmd, func(t *testing.T) {
		out, err := exec.CommandContext(ctx, psql, url, "-tAc", "SELECT pg_try_advisory_lock(hashtextextended('orders/sku-42', 0))").Output()
		if err != nil || strings.TrimSpace(string(out)) != "f" {
			t.Fatalf("psql pg_try_advisory_lock while dlock holds: %q %v", out, err)
		}
	})
}

// The row lock's query uses the primary key's index.
func TestRowQueryUsesIndex(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	_ = open(t, url, pglock.ModeRow) // creates the tables
	ctx := t.Context()
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, "INSERT INTO dlock_rows SELECT 'n' || g FROM generate_series(1, 5000) g ON CONFLICT DO NOTHING; ANALYZE dlock_rows"); err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	q := strings.NewReplacer("$1", "'n42'", "$2", "'{tcp_user_timeout}'", "$3", "'{1000}'", "$4", "true").Replace(pglock.RowLockSQL)
	rows, err := conn.Query(ctx, "EXPLAIN "+q)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		plan.WriteString(line + "\n")
	}
	if !strings.Contains(plan.String(), "Index") || !strings.Contains(plan.String(), "dlock_rows_pkey") {
		t.Fatalf("FOR UPDATE query does not use the primary key:\n%s", plan.String())
	}
}

// A user without privileges gets an error that names them.
func TestMissingPrivileges(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	ctx := t.Context()
	admin := connect(t, url)
	if _, err := admin.Exec(ctx, "CREATE ROLE weak LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	weak := strings.Replace(url, "postgres@", "weak@", 1)
	_, err := dlock.Open(ctx, weak)
	if err == nil || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "CREATE") {
		t.Fatalf("Open as an unprivileged user: %v; want an error naming the privileges", err)
	}
	// Once an admin has migrated, the error names the table privileges.
	_ = open(t, url, pglock.ModeTable)
	_, err = dlock.Open(ctx, weak)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Open without table privileges: %v", err)
	}
}

func TestBadMode(t *testing.T) {
	srv := testserver.Postgres(t)
	if _, err := dlock.Open(t.Context(), testserver.PostgresURL(srv)+"&mode=bogus"); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Fatalf("bad mode: %v", err)
	}
}

// A dlock_locks made before holder labels and release ids (no label or
// released column) gets the columns at Open, keeps its rows, and holds
// labels from then on; Migrate can run again (sqltest.OldShapeMigrated).
func TestMigrateAddsLabel(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	ctx := t.Context()
	admin := connect(t, url)
	// The table as the previous version made it, with a live hold of its.
	if _, err := admin.Exec(ctx, `
CREATE TABLE dlock_locks (
  name       text PRIMARY KEY,
  owner      text NOT NULL,
  holds      integer NOT NULL,
  token      bigint NOT NULL,
  expires_at timestamptz NOT NULL
);
INSERT INTO dlock_locks VALUES ('old', 'old-owner', 1, 1, clock_timestamp() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	sqltest.OldShapeMigrated(t, open(t, url, pglock.ModeTable))
}

// connect opens a connection to url, closed when t ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// See sqltest.StateRowWaitKept.
func TestTableStateRowWaitKept(t *testing.T) {
	be := sqlBackend(t)
	sqltest.StateRowWaitKept(t, be, func(ctx context.Context, t *testing.T, name string) func() {
		raw := connect(t, testserver.PostgresURL(be.Server))
		tx, err := raw.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := tx.Exec(ctx, `SELECT 1 FROM dlock_kinds WHERE name = $1 FOR UPDATE`, name); err != nil || n.RowsAffected() == 0 {
			t.Fatalf("lock the state rows: %v, %d rows", err, n.RowsAffected())
		}
		return func() {
			if err := tx.Commit(ctx); err != nil {
				t.Error(err)
			}
		}
	})
}
