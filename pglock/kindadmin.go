package pglock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/jackc/pgx/v5"
)

// What operators see and do to read-write locks and semaphores: Inspect and
// force-release, in table and session mode; kinds.go holds their acquire
// and release.

// InspectKind implements driver.KindInspector (table mode).
func (d *pgDriver) InspectKind(ctx context.Context, name string, kind driver.Kind) (driver.Info, error) {
	if !d.Caps().Supports(kind) {
		return driver.Info{}, fmt.Errorf("pglock: %w: %s", dlock.ErrUnsupported, d.Caps().KindsNote)
	}
	if d.mode == ModeSession {
		return d.inspectSessionKind(ctx, name, kind)
	}
	fam := int(kind.Family())
	holds, err := d.kindHolds(ctx, d.pool, name, fam)
	if err != nil {
		return driver.Info{}, pgErr("inspect", err)
	}
	var waiters, limit int
	err = d.pool.QueryRow(ctx, `SELECT
  (SELECT count(*) FROM dlock_waits WHERE name = $1 AND family = $2 AND expires_at > clock_timestamp()),
  coalesce((SELECT lim FROM dlock_kinds WHERE name = $1 AND family = $2), 0)`, name, fam).Scan(&waiters, &limit)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return driver.Info{}, pgErr("inspect", err)
	}
	if len(holds) == 0 {
		limit = 0 // the next holder sets it
	}
	return sqlbase.Info(name, kind, holds, waiters, limit), nil
}

// inspectSessionKind describes a read-write lock in session mode: the
// holders are the dlock_holds rows whose backend holds the advisory lock
// (no TTL: the hold lasts as long as the session), the waiters the
// sessions waiting for it.
func (d *pgDriver) inspectSessionKind(ctx context.Context, name string, kind driver.Kind) (driver.Info, error) {
	const match = rwLockMatch
	rows, err := d.pool.Query(ctx, `SELECT h.owner, h.kind, h.token FROM dlock_holds h, (SELECT `+rwKey+` AS k) k
WHERE h.name = $1 AND h.family = 1 AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.granted AND l.pid = h.pid AND `+match+`)`, name)
	if err != nil {
		return driver.Info{}, pgErr("inspect", err)
	}
	holds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sqlbase.KindHold, error) {
		var h sqlbase.KindHold
		var kind int16
		var tok int64
		err := row.Scan(&h.Owner, &kind, &tok)
		h.Kind, h.Token, h.Holds = driver.Kind(kind), uint64(tok), 1
		return h, err
	})
	if err != nil {
		return driver.Info{}, pgErr("inspect", err)
	}
	var waiters int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks l, (SELECT `+rwKey+` AS k) k WHERE NOT l.granted AND `+match,
		name).Scan(&waiters); err != nil {
		return driver.Info{}, pgErr("inspect", err)
	}
	return sqlbase.Info(name, kind, holds, waiters, 0), nil
}

// rwLockMatch matches the pg_locks rows l of the advisory lock k.k, the
// read-write lock's key (rwKey), in this database: advisory locks are per
// database, and a lock of the same key in another is another lock.
const rwLockMatch = `l.locktype = 'advisory' AND l.objsubid = 1 AND l.database = ` + thisDatabase + `
  AND l.classid = ((k.k >> 32) & 4294967295)::bigint::text::oid AND l.objid = (k.k & 4294967295)::bigint::text::oid`

// thisDatabase is the OID of the session's database, as pg_locks names it.
const thisDatabase = "(SELECT oid FROM pg_database WHERE datname = current_database())"

// ForceReleaseKind implements driver.KindForceReleaser. In table mode it
// deletes the read-write lock's or semaphore's hold rows (those with the
// given tokens, or all) and wakes the waiters, whose places stay. In
// session mode, as ForceRelease does for a mutex, it ends the connections
// holding the read-write lock's advisory lock in this database (those of
// the holds with the given tokens, or all) with pg_terminate_backend; the
// waiters' pg_advisory_lock calls then go on in PostgreSQL's order.
func (d *pgDriver) ForceReleaseKind(ctx context.Context, name string, kind driver.Kind, tokens []uint64) error {
	if !d.Caps().Supports(kind) {
		return fmt.Errorf("pglock: %w: %s", dlock.ErrUnsupported, d.Caps().KindsNote)
	}
	toks := make([]int64, len(tokens))
	for i, t := range tokens {
		toks[i] = int64(t)
	}
	if d.mode == ModeTable { // drop the hold rows, and wake the waiters
		_, err := d.pool.Exec(ctx, `WITH d AS (
  DELETE FROM dlock_holds WHERE name = $1 AND family = $2 AND (cardinality($3::bigint[]) = 0 OR token = ANY($3::bigint[]))
  RETURNING name
) SELECT pg_notify('dlock_release_' || 'dlock_locks'::regclass::oid::text, md5($1)) WHERE EXISTS (SELECT 1 FROM d)`,
			name, int(kind.Family()), toks)
		return pgErr("force release", err)
	}
	_, err := d.pool.Exec(ctx, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l, (SELECT `+rwKey+` AS k) k
WHERE l.granted AND `+rwLockMatch+`
  AND (cardinality($2::bigint[]) = 0
    OR l.pid IN (SELECT h.pid FROM dlock_holds h WHERE h.name = $1 AND h.family = 1 AND h.token = ANY($2::bigint[])))`, name, toks)
	return pgErr("force release (pg_terminate_backend needs membership in the holder's role, or pg_signal_backend)", err)
}

var _ driver.KindForceReleaser = (*pgDriver)(nil)
