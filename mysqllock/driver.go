package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/slots"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/go-sql-driver/mysql"
)

type myDriver struct {
	db    *sql.DB
	owned bool
	mode  Mode
	slots slots.Slots   // row and session modes: one per held connection
	holds sqlbase.Holds // table mode: holds whose release failed
}

var schema = []string{
	`CREATE TABLE IF NOT EXISTS dlock_locks (
  name       VARBINARY(1024) NOT NULL PRIMARY KEY,
  owner      VARBINARY(256) NOT NULL,
  holds      INT NOT NULL,
  token      BIGINT UNSIGNED NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  label      VARBINARY(256) NOT NULL DEFAULT '',
  released   VARBINARY(544) NOT NULL DEFAULT ''
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS dlock_tokens (
  name       VARBINARY(1024) NOT NULL PRIMARY KEY,
  token      BIGINT UNSIGNED NOT NULL,
  owner      VARBINARY(256) NULL,
  holder_id  BIGINT UNSIGNED NULL
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS dlock_rows (
  name VARBINARY(1024) NOT NULL PRIMARY KEY
) ENGINE=InnoDB`,
}

func newDriver(ctx context.Context, db *sql.DB, opts Options) (*myDriver, error) {
	mode, maxHeld, err := sqlbase.CheckOptions("mysqllock", opts.Mode, opts.MaxHeld)
	if err != nil {
		return nil, err
	}
	if maxHeld, err = sqlbase.HeldCap("mysqllock", mode, maxHeld, db.Stats().MaxOpenConnections); err != nil {
		return nil, err
	}
	d := &myDriver{db: db, owned: opts.CloseDB, mode: mode, slots: slots.New(maxHeld)}
	if err := db.PingContext(ctx); err != nil {
		return nil, myErr("connect", err)
	}
	if d.mode == ModeSession {
		var name, value string
		err := db.QueryRowContext(ctx, "SHOW VARIABLES LIKE 'wsrep_on'").Scan(&name, &value)
		if err == nil && strings.EqualFold(value, "ON") {
			return nil, fmt.Errorf("mysqllock: session mode: %w: GET_LOCK is not supported on Galera clusters; use table mode", dlock.ErrUnsupported)
		}
	}
	if err := d.Migrate(ctx); err != nil {
		return nil, err
	}
	if err := checkSession(ctx, db); err != nil {
		return nil, err
	}
	var offset int64
	if err := db.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())").Scan(&offset); err == nil && offset != 0 {
		log := opts.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("mysqllock: the session's time zone is not UTC (NOW is UTC" + fmt.Sprintf("%+d", offset) + "s): dlock judges expiry by UTC_TIMESTAMP, dlock before 2026-11-28 by NOW, so do not run the two on the same tables")
	}
	return d, nil
}

// checkSession refuses session settings that break the lock tables'
// guarantees, however they were set (a URL's system variable in any
// spelling, the DSN of an application's pool): autocommit off, which leaves
// a grant's row lock taken, and a fixed timestamp (SET timestamp=…), which
// stops the clock UTC_TIMESTAMP reads, so that expiries are written in the
// past for every other client.
func checkSession(ctx context.Context, db *sql.DB) error {
	var autocommit int
	var drift float64
	err := db.QueryRowContext(ctx, "SELECT @@session.autocommit, ABS(@@session.timestamp - UNIX_TIMESTAMP(SYSDATE(6)))").Scan(&autocommit, &drift)
	if err != nil {
		return myErr("check session", err)
	}
	if autocommit != 1 {
		return fmt.Errorf("mysqllock: %w: the pool's sessions have autocommit off; dlock needs it on", dlock.ErrInvalidConfig)
	}
	if drift > 1 {
		return fmt.Errorf("mysqllock: %w: the pool's sessions have a fixed timestamp (SET timestamp), %.0fs from the server's clock; dlock needs the clock", dlock.ErrInvalidConfig, drift)
	}
	return nil
}

// Migrate creates the tables if they are missing, and adds the columns
// later versions added to tables an earlier one made.
func (d *myDriver) Migrate(ctx context.Context) error {
	// CREATE TABLE IF NOT EXISTS needs the CREATE privilege even when the
	// table is there: look first, so a worker without it can Open.
	all := append(append([]string{}, schema...), kindsSchema...)
	var have int
	if err := d.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_name IN ('dlock_locks', 'dlock_tokens', 'dlock_rows', 'dlock_kinds', 'dlock_holds', 'dlock_waits')`).Scan(&have); err != nil {
		return myErr("migrate", err)
	}
	for _, s := range all {
		if have == len(all) {
			break
		}
		if _, err := d.db.ExecContext(ctx, s); err != nil {
			return myErr("create tables", err)
		}
	}
	// dlock_locks made before holder labels lacks the label column, and
	// one made before release ids the released column. MySQL has no ADD
	// COLUMN IF NOT EXISTS (MariaDB has), and ALTER TABLE needs the ALTER
	// privilege even when there is nothing to do: look first.
	for _, c := range addedColumns {
		var n int
		if err := d.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = 'dlock_locks' AND column_name = ?`, c.name).Scan(&n); err != nil {
			return myErr("migrate", err)
		}
		if n > 0 {
			continue
		}
		_, err := d.db.ExecContext(ctx, "ALTER TABLE dlock_locks ADD COLUMN "+c.name+" "+c.def)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1060 { // duplicate column: a concurrent Migrate added it
			continue
		}
		if err != nil {
			return myErr("add the "+c.name+" column", err)
		}
	}
	return nil
}

// addedColumns are the columns of dlock_locks that later versions added,
// with their definitions, as in schema.
var addedColumns = []struct{ name, def string }{
	{"label", "VARBINARY(256) NOT NULL DEFAULT ''"},
	{"released", "VARBINARY(544) NOT NULL DEFAULT ''"}, // ids of the releases applied: see releaseQuery
}

// myErr wraps a database error, naming the privilege when it is one.
func myErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1142, 1143, 1044: // command/column/db access denied
			return fmt.Errorf("mysqllock: %s: permission denied (%s): the user needs the grant in the mysqllock package doc: SELECT, INSERT and UPDATE on dlock_locks, dlock_tokens and dlock_rows, SELECT, INSERT, UPDATE and DELETE on dlock_kinds, dlock_holds and dlock_waits, and CREATE to make them (or run dlock migrate as a user who can) (%w): %w",
				op, me.Message, dlock.ErrInvalidConfig, err)
		case 1095, 1227: // not owner of the thread; KILL needs a privilege
			return fmt.Errorf("mysqllock: %s: permission denied (%s): ending another user's connection needs the CONNECTION ADMIN (or SUPER) privilege (%w): %w",
				op, me.Message, dlock.ErrInvalidConfig, err)
		case 1045: // access denied for user
			return fmt.Errorf("mysqllock: %s: the server refused the user or password (%w): %w", op, dlock.ErrInvalidConfig, err)
		}
	}
	return fmt.Errorf("mysqllock: %s: %w", op, err)
}

func (d *myDriver) Caps() driver.Caps {
	return sqlbase.Caps(d.mode == ModeTable, time.Microsecond, nil, connKindsNote)
}

func (d *myDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	return sqlbase.Acquire(ctx, "mysqllock", d.Caps(), d.mode == ModeTable, r, d.acquireRow, d.acquireKind, d.acquireConn)
}

// acquireSQL grants a free or expired lock, re-enters the owner's live one,
// or leaves a live one alone, in one statement. The row is never deleted
// (a release marks it expired), so its token column is the name's counter.
// MySQL evaluates ON DUPLICATE KEY UPDATE assignments left to right, each
// seeing the ones before: every decision reads expires_at, which changes
// last, and the owner, which changes only on a takeover (then the last
// test's first branch wins). LAST_INSERT_ID carries the outcome back in the
// reply: the token when granted, 0 when the lock is held by another. The
// label is the first hold's: re-entry keeps it.
const acquireSQL = `INSERT INTO dlock_locks (name, owner, holds, token, expires_at, label)
VALUES (?, ?, 1, LAST_INSERT_ID(1), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?)
ON DUPLICATE KEY UPDATE
  token = IF(expires_at <= UTC_TIMESTAMP(6), LAST_INSERT_ID(token + 1), IF(owner = VALUES(owner), LAST_INSERT_ID(token), IF(LAST_INSERT_ID(0) = 0, token, token))),
  holds = IF(expires_at <= UTC_TIMESTAMP(6), 1, IF(owner = VALUES(owner), holds + 1, holds)),
  label = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(label), label),
  released = IF(expires_at <= UTC_TIMESTAMP(6), '', released),
  owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
  expires_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(expires_at), IF(owner = VALUES(owner), GREATEST(expires_at, VALUES(expires_at)), expires_at))`

// releaseQuery returns the statement that applies s to the row of (name,
// owner, s.Token), and its arguments: it drops the holds of each of
// s.Drops that the row has not applied yet (whose id is not in its
// released column), but keeps at least s.Floor, or what the row has if
// less (see sqlbase.Settle; a floor never raises the row), marking the row
// expired when none are left; then it adds the ids it did not list to
// released, which keeps the last sqlbase.KeptDrops (",id" each, of fixed
// length, so that a search for ",id" finds only a whole one). holds
// changes after expires_at and owner and before released (assignments see
// the ones before), and LAST_INSERT_ID carries what is left of it plus one,
// so that 0 means no such live hold (an UPDATE that changes nothing reports
// no affected rows).
func releaseQuery(s sqlbase.Settle, name, owner string) (string, []any) {
	terms := make([]string, len(s.Drops))
	subArgs := make([]any, 0, 2*len(s.Drops))
	newArgs := make([]any, 0, 2*len(s.Drops))
	for i, d := range s.Drops {
		terms[i] = "IF(LOCATE(?, released) > 0, 0, ?)"
		subArgs = append(subArgs, ","+d.ID, d.Count)
		newArgs = append(newArgs, ","+d.ID, ","+d.ID)
	}
	left := "GREATEST(holds - (" + strings.Join(terms, " + ") + "), LEAST(?, holds))"
	q := `UPDATE dlock_locks SET
  expires_at = IF(` + left + ` <= 0, '1970-01-02', expires_at),
  owner = IF(` + left + ` <= 0, '', owner),
  holds = LAST_INSERT_ID(GREATEST(` + left + `, 0) + 1) - 1,
  released = RIGHT(CONCAT(released` + strings.Repeat(", IF(LOCATE(?, released) > 0, '', ?)", len(s.Drops)) + `), ?)
WHERE name = ? AND owner = ? AND token = ? AND holds > 0 AND expires_at > UTC_TIMESTAMP(6)`
	args := make([]any, 0, 3*len(subArgs)+len(newArgs)+7)
	for range 3 {
		args = append(append(args, subArgs...), s.Floor)
	}
	args = append(append(args, newArgs...), sqlbase.KeptDrops*(1+sqlbase.DropIDLen), name, owner, s.Token)
	return q, args
}

// acquireRow grants, re-enters or refuses in one statement; only a refusal
// reads the holder's time left, for the waiter's next try.
func (d *myDriver) acquireRow(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if err := d.holds.Settle(ctx, r.Name, r.Owner, d.releaseStmt(r.Name, r.Owner)); err != nil {
		return driver.Grant{}, myErr("settle a failed release", err)
	}
	var token int64
	end, err := d.holds.Enter(ctx, r.Name, r.Owner) // no settle of the owner's holds until the grant is recorded
	if err != nil {
		return driver.Grant{}, myErr("acquire", err)
	}
	err = d.onConn(ctx, func(ctx context.Context, c *sql.Conn) error {
		res, err := c.ExecContext(ctx, acquireSQL, r.Name, r.Owner, r.TTL.Microseconds(), r.Label)
		if err == nil {
			token, err = res.LastInsertId()
		}
		return err
	})
	if err == nil && token > 0 {
		d.holds.Granted(r.Name, r.Owner, uint64(token))
	}
	end()
	if err != nil {
		return driver.Grant{}, myErr("acquire", err)
	}
	if token > 0 {
		return driver.Grant{Acquired: true, Token: uint64(token)}, nil
	}
	var leftUs int64
	err = d.db.QueryRowContext(ctx, `SELECT GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), 0) FROM dlock_locks WHERE name = ?`,
		r.Name).Scan(&leftUs)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return driver.Grant{}, myErr("acquire", err)
	}
	return driver.Grant{Retry: time.Duration(leftUs) * time.Microsecond}, nil
}

func (d *myDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
	if d.mode != ModeTable {
		for i, h := range batch {
			res[i].Err = h.Handle.(*Lease).check(ctx, h.TTL)
		}
		return res
	}
	var kinds []int
	var rowsOnly []driver.Held
	for i, h := range batch {
		if h.Kind != driver.Exclusive {
			kinds = append(kinds, i)
		} else {
			rowsOnly = append(rowsOnly, h)
		}
	}
	if len(kinds) > 0 {
		d.renewKinds(ctx, batch, res, kinds)
		if len(rowsOnly) == 0 {
			return res
		}
		rest, j := d.Renew(ctx, rowsOnly), 0
		for i, h := range batch {
			if h.Kind == driver.Exclusive {
				res[i], j = rest[j], j+1
			}
		}
		return res
	}
	// One UPDATE per distinct TTL (usually one), then one SELECT of which
	// holds are live, in a transaction bounded by the batch's shortest TTL
	// (boundedTx: the UPDATE locks the rows until the commit).
	live := map[string]bool{}
	bound := batch[0].TTL
	for _, h := range batch {
		bound = min(bound, h.TTL)
	}
	err := d.onNewConn(ctx, func(c *sql.Conn) error {
		return boundedTx(ctx, c, bound, func(tx *sql.Tx) (err error) {
			byTTL := map[time.Duration][]driver.Held{}
			for _, h := range batch {
				byTTL[h.TTL] = append(byTTL[h.TTL], h)
			}
			for ttl, hs := range byTTL {
				in, args := holdsIn(hs)
				args = append([]any{ttl.Microseconds()}, args...)
				if _, err = tx.ExecContext(ctx, `UPDATE dlock_locks SET expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
WHERE expires_at > UTC_TIMESTAMP(6) AND (name, owner, token) IN (`+in+`)`, args...); err != nil {
					return err
				}
			}
			in, args := holdsIn(batch)
			rows, err := tx.QueryContext(ctx, `SELECT name FROM dlock_locks WHERE expires_at > UTC_TIMESTAMP(6) AND (name, owner, token) IN (`+in+`)`, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					return err
				}
				live[n] = true
			}
			return rows.Err() // a read that broke off is uncertain, not a loss
		})
	})
	for i, h := range batch {
		switch {
		case err != nil:
			res[i].Err = myErr("renew", err)
		case !live[h.Name]:
			res[i].Err = fmt.Errorf("mysqllock: %w: the row expired or changed owner", dlock.ErrLeaseLost)
		}
	}
	return res
}

// holdsIn returns "(?, ?, ?), …" and its arguments for a batch.
func holdsIn(hs []driver.Held) (string, []any) {
	parts := make([]string, len(hs))
	args := make([]any, 0, 3*len(hs))
	for i, h := range hs {
		parts[i] = "(?, ?, ?)"
		args = append(args, h.Name, h.Owner, h.Token)
	}
	return strings.Join(parts, ", "), args
}

func (d *myDriver) Release(ctx context.Context, h driver.Held, count int) error {
	if d.mode != ModeTable {
		l, ok := h.Handle.(*Lease)
		if !ok {
			return fmt.Errorf("mysqllock: release: %w", dlock.ErrLeaseLost)
		}
		return l.release(ctx)
	}
	if h.Kind != driver.Exclusive {
		return d.releaseKind(ctx, h, count)
	}
	_, o, err := d.holds.Drop(ctx, h.Name, h.Owner, h.Token, count, h.TTL, d.releaseStmt(h.Name, h.Owner))
	switch o {
	case sqlbase.Uncertain:
		return myErr("release", err)
	case sqlbase.Gone:
		return fmt.Errorf("mysqllock: release: %w: expired, held by another owner or deleted", dlock.ErrLeaseLost)
	}
	return nil
}

// releaseStmt runs releaseSQL for a sqlbase.Settle of (name, owner). The row
// stays, expired, carrying the token counter.
func (d *myDriver) releaseStmt(name, owner string) sqlbase.Stmt {
	return func(ctx context.Context, s sqlbase.Settle) (int, sqlbase.Outcome, error) {
		q, args := releaseQuery(s, name, owner)
		res, err := d.db.ExecContext(ctx, q, args...)
		var left int64
		if err == nil {
			left, err = res.LastInsertId()
		}
		switch {
		case err != nil:
			return 0, sqlbase.Uncertain, err
		case left == 0:
			return 0, sqlbase.Gone, nil
		}
		return int(left - 1), sqlbase.Applied, nil
	}
}

func (d *myDriver) Inspect(ctx context.Context, name string) (driver.Info, error) {
	if d.mode != ModeTable {
		return d.inspectConn(ctx, name)
	}
	info := driver.Info{Name: name}
	var leftUs int64
	err := d.db.QueryRowContext(ctx, `SELECT owner, label, holds, token, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM dlock_locks WHERE name = ? AND holds > 0 AND expires_at > UTC_TIMESTAMP(6)`, name).Scan(&info.Owner, &info.Label, &info.Holds, &info.Token, &leftUs)
	if errors.Is(err, sql.ErrNoRows) {
		return info, nil
	}
	if err != nil {
		return info, myErr("inspect", err)
	}
	info.Held, info.TTL = true, time.Duration(leftUs)*time.Microsecond
	return info, nil
}

func (d *myDriver) Close() error {
	if d.owned {
		return d.db.Close()
	}
	return nil
}

// As sets **sql.DB targets.
func (d *myDriver) As(target any) bool {
	if p, ok := target.(**sql.DB); ok {
		*p = d.db
		return true
	}
	return false
}
