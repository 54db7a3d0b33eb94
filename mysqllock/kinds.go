package mysqllock

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/go-sql-driver/mysql"
)

// Read-write locks and semaphores, table mode (see the package doc).

var kindsSchema = []string{
	`CREATE TABLE IF NOT EXISTS dlock_kinds (
  name   VARBINARY(1024) NOT NULL,
  family TINYINT NOT NULL,
  token  BIGINT UNSIGNED NOT NULL DEFAULT 0,
  seq    BIGINT UNSIGNED NOT NULL DEFAULT 0,
  lim    INT NOT NULL DEFAULT 0,
  PRIMARY KEY (name, family)
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS dlock_holds (
  name       VARBINARY(1024) NOT NULL,
  family     TINYINT NOT NULL,
  owner      VARBINARY(256) NOT NULL,
  kind       TINYINT NOT NULL,
  holds      INT NOT NULL,
  token      BIGINT UNSIGNED NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  label      VARBINARY(256) NOT NULL DEFAULT '',
  PRIMARY KEY (name, family, owner)
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS dlock_waits (
  name       VARBINARY(1024) NOT NULL,
  family     TINYINT NOT NULL,
  owner      VARBINARY(256) NOT NULL,
  kind       TINYINT NOT NULL,
  seq        BIGINT UNSIGNED NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  PRIMARY KEY (name, family, owner)
) ENGINE=InnoDB`,
}

// connKindsNote is why row and session modes hold no read-write locks or
// semaphores.
const connKindsNote = "row and session modes hold an InnoDB row lock or GET_LOCK on a connection: GET_LOCK " +
	"has no shared mode, FOR SHARE lets new readers past a waiting FOR UPDATE (writers could starve), and " +
	"neither can wait for one of N locks: use mode=table"

// acquireKind decides a read, write or permit request in one transaction
// that locks the lock's state row first (FOR UPDATE), so that no hold is
// added while it decides.
//
// The state row is made first in a statement of its own: INSERT IGNORE of
// an existing row takes a shared lock on it, which two transactions would
// then both try to raise to FOR UPDATE's (a deadlock). A deadlock with a
// renewal batch (which locks hold rows of several locks) is retried.
func (d *myDriver) acquireKind(ctx context.Context, r driver.Request) (driver.Grant, error) {
	fam := int(r.Kind.Family())
	if _, err := d.db.ExecContext(ctx, `INSERT IGNORE INTO dlock_kinds (name, family) VALUES (?, ?)`, r.Name, fam); err != nil {
		return driver.Grant{}, myErr("acquire", err)
	}
	return sqlbase.AcquireKind(ctx, "mysqllock", r, func() (driver.Grant, sqlbase.Verdict, int, error) { return d.tryKind(ctx, r, fam) },
		func(err error) bool { var me *mysql.MySQLError; return errors.As(err, &me) && me.Number == 1213 }, myErr)
}

// tryKind runs one acquire transaction (boundedTx: it locks the lock's
// state row over several round trips).
func (d *myDriver) tryKind(ctx context.Context, r driver.Request, fam int) (g driver.Grant, verdict sqlbase.Verdict, limit int, err error) {
	err = d.onConn(ctx, func(ctx context.Context, c *sql.Conn) error {
		return boundedTx(ctx, c, r.TTL, func(tx *sql.Tx) (err error) {
			g, verdict, limit, err = d.decideKind(ctx, tx, r, fam)
			return err
		})
	})
	return g, verdict, limit, err
}

// boundedTx runs f in a READ COMMITTED transaction on c and commits it,
// with the session's wait_timeout set to ttl, at most sqlbase.MaxTxIdle
// (rounded up to whole seconds), while it runs. The table mode's
// transactions lock rows over several round trips (a lock's state row,
// holds): a client paused or cut off
// between two of them would hold those, and keep every other client of the
// lock waiting, until the server ended its session at wait_timeout (eight
// hours by default). The setting is put back after the transaction; a
// connection on which that failed is dropped from the pool rather than
// kept with it. The transaction's outcome stands either way.
func boundedTx(ctx context.Context, c *sql.Conn, ttl time.Duration, f func(tx *sql.Tx) error) error {
	if _, err := c.ExecContext(ctx, "SET @dlock_wait_timeout = @@SESSION.wait_timeout, SESSION wait_timeout = ?", sqlbase.IdleSeconds(sqlbase.TxIdle(ttl))); err != nil {
		return err
	}
	err := func() error {
		tx, err := c.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := f(tx); err != nil {
			return err
		}
		return tx.Commit()
	}()
	if _, rerr := c.ExecContext(ctx, "SET SESSION wait_timeout = @dlock_wait_timeout"); rerr != nil {
		_ = c.Raw(func(any) error { return sqldriver.ErrBadConn })
	}
	return err
}

// onNewConn runs f on a connection of the pool's own, given back after.
func (d *myDriver) onNewConn(ctx context.Context, f func(c *sql.Conn) error) error {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

func (d *myDriver) decideKind(ctx context.Context, tx *sql.Tx, r driver.Request, fam int) (driver.Grant, sqlbase.Verdict, int, error) {
	var g driver.Grant
	var limit int
	if err := tx.QueryRowContext(ctx, `SELECT lim FROM dlock_kinds WHERE name = ? AND family = ? FOR UPDATE`, r.Name, fam).Scan(&limit); err != nil {
		return g, 0, 0, err
	}
	// A hold written from here on expires its TTL after a statement sent
	// after now, so its validity counts from now: not from the attempt's
	// start, which a wait for the state row (behind a client paused in its
	// transaction, up to the idle bound) may have put a TTL in the past,
	// making a sound grant look too late.
	since := time.Now()
	for _, t := range []string{"dlock_holds", "dlock_waits"} {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+t+` WHERE name = ? AND family = ? AND expires_at <= UTC_TIMESTAMP(6)`, r.Name, fam); err != nil {
			return g, 0, 0, err
		}
	}
	holds, err := kindSummary(ctx, tx, r.Name, fam, r.Owner)
	if err != nil {
		return g, 0, 0, err
	}
	rows, err := tx.QueryContext(ctx, kindWaitsSQL, r.Name, fam, r.Owner, r.Name, fam, r.Owner)
	if err != nil {
		return g, 0, 0, err
	}
	var waits []sqlbase.KindWait
	for rows.Next() {
		var w sqlbase.KindWait
		if err := rows.Scan(&w.Owner, &w.Kind, &w.Seq); err != nil {
			rows.Close()
			return g, 0, 0, err
		}
		waits = append(waits, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return g, 0, 0, err
	}
	verdict := sqlbase.Decide(r, holds, waits, limit)
	ttl := r.TTL.Microseconds()
	switch verdict {
	case sqlbase.Grant:
		res, err := tx.ExecContext(ctx, `UPDATE dlock_kinds SET token = LAST_INSERT_ID(token + 1), lim = IF(? > 0, ?, lim)
WHERE name = ? AND family = ?`, r.Limit, r.Limit, r.Name, fam)
		var tok int64
		if err == nil {
			tok, err = res.LastInsertId()
		}
		if err != nil {
			return g, 0, 0, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO dlock_holds (name, family, owner, kind, holds, token, expires_at, label)
VALUES (?, ?, ?, ?, 1, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?)`, r.Name, fam, r.Owner, int(r.Kind), tok, ttl, r.Label); err != nil {
			return g, 0, 0, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM dlock_waits WHERE name = ? AND family = ? AND owner = ?`, r.Name, fam, r.Owner); err != nil {
			return g, 0, 0, err
		}
		g = driver.Grant{Acquired: true, Token: uint64(tok), Holds: 1, Since: since}
	case sqlbase.Reenter:
		// kindHolds' read locked nothing: a release of the owner's last
		// hold (which does not lock the state row) may have deleted the
		// row since. (holds + 1 changes the row, so it counts as affected.)
		res, err := tx.ExecContext(ctx, `UPDATE dlock_holds SET holds = holds + 1,
  expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
WHERE name = ? AND family = ? AND owner = ?`, ttl, r.Name, fam, r.Owner)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err != nil {
			return g, 0, 0, err
		}
		if n == 0 {
			return g, 0, 0, sqlbase.ErrHoldGone
		}
		var tok uint64
		if err := tx.QueryRowContext(ctx, `SELECT token, holds FROM dlock_holds WHERE name = ? AND family = ? AND owner = ?`,
			r.Name, fam, r.Owner).Scan(&tok, &g.Holds); err != nil {
			return g, 0, 0, err
		}
		g.Acquired, g.Token, g.Since = true, tok, since
	case sqlbase.Refuse:
		g.Retry = sqlbase.Retry(r, holds)
		if r.Kind == driver.Permit || r.Try { // a single attempt keeps no place
			break
		}
		life := sqlbase.WaitLife(r.TTL).Microseconds()
		mine := false
		for _, w := range waits {
			mine = mine || w.Owner == r.Owner
		}
		if mine { // keep our place, a while longer
			_, err = tx.ExecContext(ctx, `UPDATE dlock_waits SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE name = ? AND family = ? AND owner = ?`, life, r.Name, fam, r.Owner)
			return g, verdict, limit, err
		}
		res, err := tx.ExecContext(ctx, `UPDATE dlock_kinds SET seq = LAST_INSERT_ID(seq + 1) WHERE name = ? AND family = ?`, r.Name, fam)
		var seq int64
		if err == nil {
			seq, err = res.LastInsertId()
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO dlock_waits (name, family, owner, kind, seq, expires_at)
VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`, r.Name, fam, r.Owner, int(r.Kind), seq, life)
		}
		if err != nil {
			return g, 0, 0, err
		}
	}
	return g, verdict, limit, nil
}

// kindLiveSQL and kindWaitsSQL read, of a lock's live holds and waiting
// records, what an acquire's verdict needs while its transaction has the
// state row locked, and no more: the requester's own, and the others'
// summed up by kind, with an empty owner (how many holds and the first to
// end; the first in line). A row per hold made every acquire of a lock
// with n holders read n rows, labels included, with the state row locked
// (and pglock's, found by an adversary, kept it locked while a client that
// had stopped reading 30,000 of them blocked the server's send).
const (
	kindLiveSQL = `SELECT owner, kind, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), 1
FROM dlock_holds WHERE name = ? AND family = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)
UNION ALL SELECT '', kind, MIN(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)), COUNT(*)
FROM dlock_holds WHERE name = ? AND family = ? AND owner <> ? AND expires_at > UTC_TIMESTAMP(6) GROUP BY kind`
	kindWaitsSQL = `SELECT owner, kind, seq FROM dlock_waits WHERE name = ? AND family = ? AND owner = ?
UNION ALL SELECT '', kind, MIN(seq) FROM dlock_waits WHERE name = ? AND family = ? AND owner <> ? GROUP BY kind`
)

// kindSummary reads kindLiveSQL for owner.
func kindSummary(ctx context.Context, tx *sql.Tx, name string, fam int, owner string) ([]sqlbase.KindHold, error) {
	rows, err := tx.QueryContext(ctx, kindLiveSQL, name, fam, owner, name, fam, owner)
	return scanHolds(rows, err, func(h *sqlbase.KindHold, left *int64) []any { return []any{&h.Owner, &h.Kind, left, &h.Owners} })
}

// scanHolds reads the rows of a query of holds, each into a KindHold
// through the destinations cols gives, one of them its time left in µs.
func scanHolds(rows *sql.Rows, err error, cols func(h *sqlbase.KindHold, left *int64) []any) ([]sqlbase.KindHold, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var holds []sqlbase.KindHold
	for rows.Next() {
		var h sqlbase.KindHold
		var left int64
		if err := rows.Scan(cols(&h, &left)...); err != nil {
			return nil, err
		}
		h.TTLLeft = time.Duration(left) * time.Microsecond
		holds = append(holds, h)
	}
	return holds, rows.Err()
}

type querier interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

// kindHolds reads the live holds of a read-write lock or semaphore.
func kindHolds(ctx context.Context, q querier, name string, fam int) ([]sqlbase.KindHold, error) {
	rows, err := q.QueryContext(ctx, `SELECT owner, label, kind, holds, token, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM dlock_holds WHERE name = ? AND family = ? AND expires_at > UTC_TIMESTAMP(6)`, name, fam)
	return scanHolds(rows, err, func(h *sqlbase.KindHold, left *int64) []any {
		return []any{&h.Owner, &h.Label, &h.Kind, &h.Holds, &h.Token, left}
	})
}

// renewKinds extends the holds of batch at idx: one UPDATE per distinct TTL,
// then one SELECT of which are live, in a transaction.
func (d *myDriver) renewKinds(ctx context.Context, batch []driver.Held, res []driver.RenewResult, idx []int) {
	live := map[int]bool{}
	bound := batch[idx[0]].TTL // the batch's shortest TTL bounds its transaction (boundedTx)
	for _, i := range idx {
		bound = min(bound, batch[i].TTL)
	}
	err := d.onNewConn(ctx, func(c *sql.Conn) error {
		return boundedTx(ctx, c, bound, func(tx *sql.Tx) (err error) {
			byTTL := map[time.Duration][]int{}
			for _, i := range idx {
				byTTL[batch[i].TTL] = append(byTTL[batch[i].TTL], i)
			}
			for ttl, is := range byTTL {
				in, args := kindHoldsIn(batch, is)
				args = append([]any{ttl.Microseconds()}, args...)
				if _, err = tx.ExecContext(ctx, `UPDATE dlock_holds SET expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
WHERE expires_at > UTC_TIMESTAMP(6) AND (name, family, owner, token) IN (`+in+`)`, args...); err != nil {
					break
				}
			}
			if err == nil {
				in, args := kindHoldsIn(batch, idx)
				var rows *sql.Rows
				rows, err = tx.QueryContext(ctx, `SELECT name, family, owner, token FROM dlock_holds
WHERE expires_at > UTC_TIMESTAMP(6) AND (name, family, owner, token) IN (`+in+`)`, args...)
				if err == nil {
					found := map[string]bool{}
					for rows.Next() {
						var name, owner string
						var fam int
						var tok uint64
						if err = rows.Scan(&name, &fam, &owner, &tok); err != nil {
							break
						}
						found[fmt.Sprint(name, "\x00", fam, "\x00", owner, "\x00", tok)] = true
					}
					rows.Close()
					if err == nil {
						err = rows.Err() // a read that broke off is uncertain, not a loss
					}
					for _, i := range idx {
						h := batch[i]
						live[i] = found[fmt.Sprint(h.Name, "\x00", int(h.Kind.Family()), "\x00", h.Owner, "\x00", h.Token)]
					}
				}
			}
			return err
		})
	})
	for _, i := range idx {
		switch {
		case err != nil:
			res[i].Err = myErr("renew", err)
		case !live[i]:
			res[i].Err = fmt.Errorf("mysqllock: %w: the hold expired or was deleted", dlock.ErrLeaseLost)
		}
	}
}

// kindHoldsIn returns "(?, ?, ?, ?), …" and its arguments for batch at idx.
func kindHoldsIn(batch []driver.Held, idx []int) (string, []any) {
	parts := make([]string, len(idx))
	args := make([]any, 0, 4*len(idx))
	for j, i := range idx {
		h := batch[i]
		parts[j] = "(?, ?, ?, ?)"
		args = append(args, h.Name, int(h.Kind.Family()), h.Owner, h.Token)
	}
	return strings.Join(parts, ", "), args
}

// releaseKind drops count holds of a live hold, deleting its row when none
// are left. Each of its statements stands alone (autocommitted), as
// pglock's one statement does: it was a transaction that locked the hold's
// row over four round trips, bounded on each idle gap (sqlbase.MaxTxIdle),
// and a client paused past the bound inside it had its session ended and
// its release failed, with nothing to try it again: the hold stayed until
// its TTL (an adversary pass, 7 of 20 pauses of 7 s with a TTL of 60 s).
func (d *myDriver) releaseKind(ctx context.Context, h driver.Held, count int) error {
	if h.Token == 0 { // a wait given up: drop its place in line
		_, err := d.db.ExecContext(ctx, `DELETE FROM dlock_waits WHERE name = ? AND family = ? AND owner = ?`,
			h.Name, int(h.Kind.Family()), h.Owner)
		if err != nil {
			return myErr("release", err)
		}
		return fmt.Errorf("mysqllock: release: %w: a wait given up holds nothing", dlock.ErrLeaseLost)
	}
	fam := int(h.Kind.Family())
	const hold = `name = ? AND family = ? AND owner = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`
	args := []any{h.Name, fam, h.Owner, h.Token, count}
	for {
		// The last holds: the row goes.
		n, err := affected(d.db.ExecContext(ctx, `DELETE FROM dlock_holds WHERE `+hold+` AND holds <= ?`, args...))
		if err != nil || n > 0 {
			return myErr("release", err)
		}
		// Some stay.
		n, err = affected(d.db.ExecContext(ctx, `UPDATE dlock_holds SET holds = holds - ? WHERE `+hold+` AND holds > ?`,
			append([]any{count}, args...)...))
		if err != nil || n > 0 {
			return myErr("release", err)
		}
		// Neither: the hold is gone, or a re-entry or another release of
		// the owner's changed its count between the two; then again.
		var one int
		err = d.db.QueryRowContext(ctx, `SELECT 1 FROM dlock_holds WHERE `+hold, args[:4]...).Scan(&one)
		if err == sql.ErrNoRows {
			return fmt.Errorf("mysqllock: release: %w: the hold expired or was deleted", dlock.ErrLeaseLost)
		}
		if err != nil {
			return myErr("release", err)
		}
	}
}

// affected is the rows a statement changed, or its error.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// ForceReleaseKind implements driver.KindForceReleaser (table mode): it
// deletes the read-write lock's or semaphore's hold rows (those with the
// given tokens, or all). The waiters find the room at their next poll. The
// DELETE can deadlock with an acquire or a renewal batch, which InnoDB then
// rolls it back for: it runs again, as those do.
func (d *myDriver) ForceReleaseKind(ctx context.Context, name string, kind driver.Kind, tokens []uint64) error {
	if !d.Caps().Supports(kind) {
		return fmt.Errorf("mysqllock: %w: %s", dlock.ErrUnsupported, d.Caps().KindsNote)
	}
	q := `DELETE FROM dlock_holds WHERE name = ? AND family = ?`
	args := []any{name, int(kind.Family())}
	if len(tokens) > 0 {
		q += ` AND token IN (?` + strings.Repeat(`, ?`, len(tokens)-1) + `)`
		for _, t := range tokens {
			args = append(args, t)
		}
	}
	for try := 1; ; try++ {
		_, err := d.db.ExecContext(ctx, q, args...)
		var me *mysql.MySQLError
		if err == nil || !errors.As(err, &me) || me.Number != 1213 || try == forceTries || ctx.Err() != nil {
			return myErr("force release", err)
		}
		time.Sleep(time.Duration(try) * 5 * time.Millisecond)
	}
}

// forceTries bounds the runs of a force release that deadlocks.
const forceTries = 20

// InspectKind implements driver.KindInspector (table mode).
func (d *myDriver) InspectKind(ctx context.Context, name string, kind driver.Kind) (driver.Info, error) {
	if !d.Caps().Supports(kind) {
		return driver.Info{}, fmt.Errorf("mysqllock: %w: %s", dlock.ErrUnsupported, d.Caps().KindsNote)
	}
	fam := int(kind.Family())
	holds, err := kindHolds(ctx, d.db, name, fam)
	if err != nil {
		return driver.Info{}, myErr("inspect", err)
	}
	var waiters, limit int
	err = d.db.QueryRowContext(ctx, `SELECT
  (SELECT COUNT(*) FROM dlock_waits WHERE name = ? AND family = ? AND expires_at > UTC_TIMESTAMP(6)),
  COALESCE((SELECT lim FROM dlock_kinds WHERE name = ? AND family = ?), 0)`, name, fam, name, fam).Scan(&waiters, &limit)
	if err != nil {
		return driver.Info{}, myErr("inspect", err)
	}
	if len(holds) == 0 {
		limit = 0 // the next holder sets it
	}
	return sqlbase.Info(name, kind, holds, waiters, limit), nil
}

var _ driver.KindForceReleaser = (*myDriver)(nil)
