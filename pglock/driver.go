package pglock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/slots"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

type pgDriver struct {
	pool  *pgxpool.Pool
	owned bool
	mode  Mode
	slots slots.Slots // row and session modes: one per held connection
	hub   *hub        // table mode: LISTEN dlock_release_<oid> (see listen.go)
	// row and session modes: the settings in boundSettings and the idle
	// timeout of the mode that the server has
	settings []string
	holds    sqlbase.Holds // table mode: holds whose release failed
}

const schema = `
CREATE TABLE IF NOT EXISTS dlock_locks (
  name       text PRIMARY KEY,
  owner      text NOT NULL,
  holds      integer NOT NULL,
  token      bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  label      text NOT NULL DEFAULT '',
  released   text[] NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS dlock_tokens (
  name       text PRIMARY KEY,
  token      bigint NOT NULL,
  owner      text,
  holder_pid integer
);
CREATE TABLE IF NOT EXISTS dlock_rows (name text PRIMARY KEY);
`

func newDriver(ctx context.Context, pool *pgxpool.Pool, opts Options) (*pgDriver, error) {
	mode, maxHeld, err := sqlbase.CheckOptions("pglock", opts.Mode, opts.MaxHeld)
	if err != nil {
		return nil, err
	}
	if maxHeld, err = sqlbase.HeldCap("pglock", mode, maxHeld, int(pool.Config().MaxConns)); err != nil {
		return nil, err
	}
	d := &pgDriver{pool: pool, owned: opts.ClosePool, mode: mode, slots: slots.New(maxHeld)}
	if err := d.Migrate(ctx); err != nil {
		return nil, err
	}
	if err := d.checkPrivileges(ctx); err != nil {
		return nil, err
	}
	if d.mode == ModeTable {
		d.hub = newHub(pool)
		return d, nil
	}
	want := append(append([]string{}, boundSettings...), idleSetting(d.mode))
	rows, err := pool.Query(ctx, "SELECT name FROM pg_settings WHERE name = ANY($1) ORDER BY array_position($1, name)", want)
	if err == nil {
		d.settings, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return nil, pgErr("read settings", err)
	}
	return d, nil
}

// migrateIdle is how long (ms) Migrate's transaction may wait for its
// client between statements before the server ends it.
const migrateIdle = "5000"

// Migrate creates the tables if they are missing, and adds the columns
// later versions added to tables an earlier one made. Concurrent callers are
// serialised by a transaction-level advisory lock.
func (d *pgDriver) Migrate(ctx context.Context) error {
	// Bounded (boundedTx): an Open paused or cut off in here would keep
	// every other Open waiting for the schema lock.
	tx, err := d.pool.BeginTx(ctx, boundedTx(migrateIdle))
	if err != nil {
		return fmt.Errorf("pglock: connect: %w", causeFirst(err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('dlock schema', 0))"); err != nil {
		return pgErr("migrate", err)
	}
	// CREATE TABLE IF NOT EXISTS needs CREATE on the schema even when the
	// table is there: look first, so a worker without it can Open.
	var have bool
	if err := tx.QueryRow(ctx, haveTablesSQL).Scan(&have); err != nil {
		return pgErr("migrate", err)
	}
	if !have {
		if _, err := tx.Exec(ctx, schema+kindsSchema); err != nil {
			return pgErr("create tables", err)
		}
	}
	// dlock_locks made before holder labels lacks the label column, and
	// one made before release ids the released column. Look before
	// altering: ALTER TABLE locks the table out and needs its owner, even
	// when the column is there.
	for _, c := range addedColumns {
		var has bool
		if err := tx.QueryRow(ctx, hasColumnSQL, c.name).Scan(&has); err != nil {
			return pgErr("migrate", err)
		}
		if has {
			continue
		}
		if _, err := tx.Exec(ctx, "ALTER TABLE dlock_locks ADD COLUMN IF NOT EXISTS "+c.name+" "+c.def); err != nil {
			return pgErr("add the "+c.name+" column", err)
		}
	}
	return pgErr("migrate", tx.Commit(ctx))
}

// privileges are the table privileges each mode needs (the package doc's
// grant gives them all).
var privileges = map[Mode][][2]string{
	ModeTable: {{"dlock_locks", "SELECT"}, {"dlock_locks", "INSERT"}, {"dlock_locks", "UPDATE"}, {"dlock_locks", "DELETE"},
		{"dlock_tokens", "SELECT"}, {"dlock_tokens", "INSERT"}, {"dlock_tokens", "UPDATE"}},
	ModeRow: {{"dlock_rows", "SELECT"}, {"dlock_rows", "INSERT"}, {"dlock_rows", "UPDATE"},
		{"dlock_tokens", "SELECT"}, {"dlock_tokens", "INSERT"}, {"dlock_tokens", "UPDATE"}},
	ModeSession: {{"dlock_tokens", "SELECT"}, {"dlock_tokens", "INSERT"}, {"dlock_tokens", "UPDATE"}},
}

// checkPrivileges fails Open, naming every missing one, when the user lacks
// a table privilege the mode needs: better than a first Lock that fails.
func (d *pgDriver) checkPrivileges(ctx context.Context) error {
	var tables, privs []string
	for _, tp := range privileges[d.mode] {
		tables, privs = append(tables, tp[0]), append(privs, tp[1])
	}
	rows, err := d.pool.Query(ctx, `SELECT p || ' on ' || t FROM unnest($1::text[], $2::text[]) AS x(t, p)
WHERE NOT has_table_privilege(t, p)`, tables, privs)
	if err != nil {
		return pgErr("check privileges", err)
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return pgErr("check privileges", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("pglock: permission denied: %s mode needs %s (see the grant in the pglock package doc) (%w)",
			d.mode, strings.Join(missing, ", "), dlock.ErrInvalidConfig)
	}
	return nil
}

// haveTablesSQL tells whether the tables that statements reach (through
// search_path) are all there.
const haveTablesSQL = `SELECT to_regclass('dlock_locks') IS NOT NULL AND to_regclass('dlock_tokens') IS NOT NULL
  AND to_regclass('dlock_rows') IS NOT NULL AND to_regclass('dlock_kinds') IS NOT NULL
  AND to_regclass('dlock_holds') IS NOT NULL AND to_regclass('dlock_waits') IS NOT NULL`

// hasColumnSQL tells whether the dlock_locks that statements reach
// (through search_path) has the column $1.
const hasColumnSQL = `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = to_regclass('dlock_locks') AND attname = $1 AND NOT attisdropped)`

// addedColumns are the columns of dlock_locks that later versions added,
// with their definitions, as in schema.
var addedColumns = []struct{ name, def string }{
	{"label", "text NOT NULL DEFAULT ''"},
	{"released", "text[] NOT NULL DEFAULT '{}'"}, // ids of the releases applied (sqlbase.Drop)
}

// pgErr wraps a database error, naming the privilege when it is one.
func pgErr(op string, err error) error {
	if err == nil {
		return nil
	}
	err = causeFirst(err)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
		return fmt.Errorf("pglock: %s: permission denied (%s): the user needs the grant in the pglock package doc: SELECT, INSERT, UPDATE and DELETE on dlock_locks, dlock_kinds, dlock_holds and dlock_waits, SELECT, INSERT and UPDATE on dlock_tokens and dlock_rows, and CREATE on the schema to make them (or run dlock migrate as a user who can) (%w): %w",
			op, pe.Message, dlock.ErrInvalidConfig, err)
	}
	if errors.As(err, &pe) && pe.Code == "3F000" { // invalid_schema_name: none in search_path is usable
		return fmt.Errorf("pglock: %s: no schema in the user's search_path that it may use (USAGE) (%w): %w", op, dlock.ErrInvalidConfig, err)
	}
	return fmt.Errorf("pglock: %s: %w", op, err)
}

func (d *pgDriver) Caps() driver.Caps {
	if d.mode == ModeSession { // read-write locks with pg_advisory_lock_shared
		return sqlbase.Caps(false, time.Millisecond, []driver.Kind{driver.Shared, driver.Write}, sessionKindsNote)
	}
	return sqlbase.Caps(d.mode == ModeTable, time.Millisecond, nil, rowKindsNote)
}

func (d *pgDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	return sqlbase.Acquire(ctx, "pglock", d.Caps(), d.mode == ModeTable, r, d.acquireRow, d.acquireKind, d.acquireConn)
}

func (d *pgDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	if d.mode == ModeTable {
		var rows, kinds []int
		for i, h := range batch {
			if h.Kind == driver.Exclusive {
				rows = append(rows, i)
			} else {
				kinds = append(kinds, i)
			}
		}
		if len(kinds) == 0 {
			return d.renewRows(ctx, batch)
		}
		res := make([]driver.RenewResult, len(batch))
		if len(rows) > 0 {
			sub := make([]driver.Held, len(rows))
			for j, i := range rows {
				sub[j] = batch[i]
			}
			for j, r := range d.renewRows(ctx, sub) {
				res[rows[j]] = r
			}
		}
		d.renewKinds(ctx, batch, res, kinds)
		return res
	}
	res := make([]driver.RenewResult, len(batch))
	for i, h := range batch {
		res[i].Err = h.Handle.(*Lease).check(ctx, h.TTL)
	}
	return res
}

// renewedSet reads the one column of a renewal statement's rows, what it
// extended (names, or batch positions), as a set; err is the query's.
func renewedSet[T comparable](rows pgx.Rows, err error) (map[T]bool, error) {
	set := map[T]bool{}
	if err != nil {
		return set, err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[T])
	for _, v := range got {
		set[v] = true
	}
	return set, err
}

func (d *pgDriver) Release(ctx context.Context, h driver.Held, count int) error {
	if d.mode == ModeTable {
		if h.Kind != driver.Exclusive {
			_, err := d.releaseKind(ctx, h, count)
			return err
		}
		_, err := d.releaseRow(ctx, h, count)
		return err
	}
	l, ok := h.Handle.(*Lease)
	if !ok {
		return fmt.Errorf("pglock: release: %w", dlock.ErrLeaseLost)
	}
	return l.release(ctx)
}

// nextTokenSQL takes the next token of the mutex $1 (outside any
// transaction), recording the holder, owner $2 on backend $3 (for Inspect
// and ForceRelease in row and session modes). It commits on its own.
const nextTokenSQL = `INSERT INTO dlock_tokens AS t (name, token, owner, holder_pid) VALUES ($1, 1, $2, $3)
ON CONFLICT (name) DO UPDATE SET token = t.token + 1, owner = EXCLUDED.owner, holder_pid = EXCLUDED.holder_pid
RETURNING token`

func (d *pgDriver) Inspect(ctx context.Context, name string) (driver.Info, error) {
	switch d.mode {
	case ModeTable:
		return d.inspectRow(ctx, name)
	default:
		return d.inspectConn(ctx, name)
	}
}

// ForceRelease drops the lock whoever holds it (token 0), or only a
// holder's whose token is token. In table mode one statement checks and
// deletes the row. In row and session modes it ends the holder's
// connection, found in the lock itself (session mode: pg_locks, in the
// statement that ends it; row mode: see forceRow), and with a token only if
// the token's row names that connection. A release clears the row's
// connection as it gives the lock up, so a stale row (a new holder that has
// not written its own yet) names none.
func (d *pgDriver) ForceRelease(ctx context.Context, name string, token uint64) error {
	const what = "force release (pg_terminate_backend needs membership in the holder's role, or pg_signal_backend)"
	var err error
	switch {
	case d.mode == ModeTable:
		_, err = d.pool.Exec(ctx, `WITH x AS (DELETE FROM dlock_locks WHERE name = $1 AND ($2 = 0 OR token = $2) RETURNING name)
SELECT pg_notify('dlock_release_' || 'dlock_locks'::regclass::oid::text, md5(name)) FROM x`, name, int64(token))
		return pgErr("force release", err)
	case d.mode == ModeSession && token == 0:
		_, err = d.pool.Exec(ctx, "SELECT pg_terminate_backend(h.pid) FROM ("+sessionHolderSQL+") h", name)
	case d.mode == ModeSession:
		_, err = d.pool.Exec(ctx, `SELECT pg_terminate_backend(t.holder_pid) FROM dlock_tokens t
WHERE t.name = $1 AND t.token = $2 AND t.holder_pid IN (`+sessionHolderSQL+`)`, name, int64(token))
	default:
		return d.forceRow(ctx, name, token)
	}
	return pgErr(what, err)
}

func (d *pgDriver) Close() error {
	if d.hub != nil {
		d.hub.close()
	}
	if d.owned {
		d.pool.Close()
	}
	return nil
}

// As sets **pgxpool.Pool targets.
func (d *pgDriver) As(target any) bool {
	if p, ok := target.(**pgxpool.Pool); ok {
		*p = d.pool
		return true
	}
	return false
}

// Subscribe implements driver.Notifier (table mode).
func (d *pgDriver) Subscribe(ctx context.Context, name string) (driver.Subscription, error) {
	if d.hub == nil {
		return nil, dlock.ErrUnsupported
	}
	return d.hub.subscribe(ctx, name)
}

// causeFirst words a connect error that pgx made of two attempts, TLS
// refused (sslmode=prefer's first try) and then the server's real answer,
// with that answer alone, first: "tls error: server refused TLS connection"
// led every error, even for a missing role. The error still wraps pgx's.
func causeFirst(err error) error {
	var pe *pgconn.PgError
	if !strings.Contains(err.Error(), "tls error: server refused TLS connection") || !errors.As(err, &pe) {
		return err
	}
	return &causeFirstError{msg: fmt.Sprintf("server error: %s: %s (SQLSTATE %s) (after a refused TLS attempt: sslmode=prefer)",
		pe.Severity, pe.Message, pe.Code), err: err}
}

type causeFirstError struct {
	msg string
	err error
}

func (e *causeFirstError) Error() string { return e.msg }
func (e *causeFirstError) Unwrap() error { return e.err }
