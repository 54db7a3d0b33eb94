package pglock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/jackc/pgx/v5/pgxpool"
)

// acquireSQL grants a free or expired lock, or re-enters the owner's live
// one, in one statement. A token is taken only when no live hold is seen;
// ON CONFLICT re-checks expiry against the latest row, so two callers can
// never both take over. Returns token, holds (0: not granted) and the
// holder's time left in ms. The label ($4) is the first hold's: re-entry
// keeps it.
const acquireSQL = `
WITH cur AS (
  SELECT owner, token, expires_at, expires_at > clock_timestamp() AS live FROM dlock_locks WHERE name = $1
), tok AS (
  INSERT INTO dlock_tokens AS t (name, token) SELECT $1, 1 WHERE NOT EXISTS (SELECT 1 FROM cur WHERE live)
  ON CONFLICT (name) DO UPDATE SET token = t.token + 1, owner = NULL, holder_pid = NULL
  RETURNING token
), ins AS (
  INSERT INTO dlock_locks AS l (name, owner, holds, token, expires_at, label)
  SELECT $1, $2, 1, tok.token, clock_timestamp() + $3 * interval '1 millisecond', $4 FROM tok
  ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, holds = 1, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at,
    label = EXCLUDED.label, released = '{}'
    WHERE l.expires_at <= clock_timestamp()
  RETURNING token, holds
), re AS (
  UPDATE dlock_locks AS l SET holds = l.holds + 1,
    expires_at = greatest(l.expires_at, clock_timestamp() + $3 * interval '1 millisecond')
  FROM cur WHERE l.name = $1 AND cur.live AND cur.owner = $2 AND l.token = cur.token
  RETURNING l.token, l.holds
)
SELECT coalesce((SELECT token FROM ins), (SELECT token FROM re), 0),
       coalesce((SELECT holds FROM ins), (SELECT holds FROM re), 0),
       coalesce((SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint FROM cur WHERE live), 0)`

func (d *pgDriver) acquireRow(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if err := d.holds.Settle(ctx, r.Name, r.Owner, d.releaseStmt(r.Name, r.Owner)); err != nil {
		return driver.Grant{}, pgErr("settle a failed release", err)
	}
	var token, holds, left int64
	end, err := d.holds.Enter(ctx, r.Name, r.Owner) // no settle of the owner's holds until the grant is recorded
	if err != nil {
		return driver.Grant{}, pgErr("acquire", err)
	}
	defer end()
	for try := 0; try < 3; try++ { // again only for a race with the owner's own process
		err = d.onConn(ctx, func(c *pgxpool.Conn) error {
			return c.QueryRow(ctx, acquireSQL, r.Name, r.Owner, r.TTL.Milliseconds(), r.Label).Scan(&token, &holds, &left)
		})
		if err != nil {
			return driver.Grant{}, pgErr("acquire", err)
		}
		if holds == 0 && left <= 0 {
			// The statement's snapshot saw no live hold, yet a newer row
			// won: another caller took the lock as this one tried (two
			// waiters woken by one release or expiry). Its time left is read
			// anew: refused with none, the wait would sleep until a release
			// that a holder that dies never sends (WakeMax, 5 s, for a 1.5 s
			// lease). If that caller is this owner (another of its
			// processes), the statement runs again at once and re-enters.
			var mine bool
			left, mine, err = d.timeLeft(ctx, r.Name, r.Owner)
			if err != nil {
				return driver.Grant{}, pgErr("acquire", err)
			}
			if mine {
				continue
			}
		}
		break
	}
	if holds == 0 {
		return driver.Grant{Retry: time.Duration(max(left, 0)) * time.Millisecond}, nil
	}
	d.holds.Granted(r.Name, r.Owner, uint64(token))
	return driver.Grant{Acquired: true, Token: uint64(token), Holds: int(holds)}, nil
}

// timeLeft returns the time left, in ms, of name's live hold, and whether
// owner holds it; 1 ms if there is none (it ended meanwhile: try again at
// once).
func (d *pgDriver) timeLeft(ctx context.Context, name, owner string) (int64, bool, error) {
	var left int64
	var mine bool
	err := d.onConn(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT coalesce(max((extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint), 0),
  coalesce(bool_or(owner = $2), false)
FROM dlock_locks WHERE name = $1 AND expires_at > clock_timestamp()`, name, owner).Scan(&left, &mine)
	})
	return max(left, 1), mine, err
}

// renewSQL extends every live hold of a batch in one statement and returns
// the names it extended. It never moves an expiry earlier: other leases of
// a re-entered hold, maybe in other processes of the owner, count on it,
// and a renewal may land after the release of the hold it renews. (A
// shorter Extend moves only its lease's own expiry.)
const renewSQL = `
UPDATE dlock_locks AS l SET expires_at = greatest(l.expires_at, clock_timestamp() + t.ttl * interval '1 millisecond')
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS t(name, owner, token, ttl)
WHERE l.name = t.name AND l.owner = t.owner AND l.token = t.token AND l.expires_at > clock_timestamp()
RETURNING l.name`

func (d *pgDriver) renewRows(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	names, owners := make([]string, len(batch)), make([]string, len(batch))
	tokens, ttls := make([]int64, len(batch)), make([]int64, len(batch))
	for i, h := range batch {
		names[i], owners[i], tokens[i], ttls[i] = h.Name, h.Owner, int64(h.Token), h.TTL.Milliseconds()
	}
	res := make([]driver.RenewResult, len(batch))
	renewed, err := renewedSet[string](d.pool.Query(ctx, renewSQL, names, owners, tokens, ttls))
	for i, h := range batch {
		switch {
		case err != nil:
			res[i].Err = pgErr("renew", err)
		case !renewed[h.Name]:
			res[i].Err = fmt.Errorf("pglock: %w: the row expired, was deleted or changed owner", dlock.ErrLeaseLost)
		}
	}
	return res
}

// releaseSQL applies the releases whose ids ($4) and counts ($5) it is
// given, but only those the row has not applied yet (its released ids),
// and keeps at least $6 holds, or what the row has if less (see
// sqlbase.Settle; a floor never raises the row): deleting the row (and
// notifying waiters) when none are left, else adding the ids it did not
// list, keeping the last $7 (sqlbase.KeptDrops). Returns rows deleted, the
// holds left (-1: not held) and whether the statement's snapshot saw the
// row of that owner and token.
//
// Its DELETE and UPDATE choose between them on the statement's snapshot,
// but each re-checks its condition on the row's latest version when a
// concurrent statement (a re-entry, another release of the owner) changed
// the row first (READ COMMITTED): then neither may apply although the row
// is still the owner's. The third column tells that case from a row that is
// gone, and releaseStmt runs the statement again.
const releaseSQL = `
WITH d AS (
  DELETE FROM dlock_locks AS l WHERE name = $1 AND owner = $2 AND token = $3 AND ` + releaseLeft + ` <= 0 RETURNING name
), u AS (
  UPDATE dlock_locks AS l SET holds = ` + releaseLeft + `,
    released = (l.released || ` + releaseNew + `)[greatest(cardinality(l.released) + cardinality(` + releaseNew + `) - $7::int + 1, 1):]
  WHERE name = $1 AND owner = $2 AND token = $3 AND ` + releaseLeft + ` > 0 RETURNING holds
), n AS (
  SELECT pg_notify('dlock_release_' || 'dlock_locks'::regclass::oid::text, md5(name)) FROM d
)
SELECT (SELECT count(*) FROM d) + (SELECT count(*) FROM n) * 0, coalesce((SELECT holds FROM u), -1),
  EXISTS (SELECT 1 FROM dlock_locks WHERE name = $1 AND owner = $2 AND token = $3)`

// releaseLeft is the holds that releaseSQL leaves in the row l: the
// releases' counts whose ids it has not applied are dropped, down to the
// floor $6 at most, and never up to it.
const releaseLeft = `greatest(l.holds - (SELECT coalesce(sum(p.c), 0) FROM unnest($4::text[], $5::int[]) AS p(id, c) WHERE p.id <> ALL (l.released)), least($6, l.holds))`

// releaseNew is the releases' ids that the row l does not list yet: a
// statement sent again (a settle of a failed release) adds none twice.
const releaseNew = `ARRAY(SELECT x FROM unnest($4::text[]) AS x WHERE x <> ALL (l.released))`

func (d *pgDriver) releaseRow(ctx context.Context, h driver.Held, count int) (int, error) {
	left, o, err := d.holds.Drop(ctx, h.Name, h.Owner, h.Token, count, h.TTL, d.releaseStmt(h.Name, h.Owner))
	switch o {
	case sqlbase.Uncertain:
		return 0, pgErr("release", err)
	case sqlbase.Gone:
		return 0, fmt.Errorf("pglock: release: %w: held by another owner or deleted", dlock.ErrLeaseLost)
	}
	return left, nil
}

// releaseStmt runs releaseSQL for a sqlbase.Settle of (name, owner).
func (d *pgDriver) releaseStmt(name, owner string) sqlbase.Stmt {
	return func(ctx context.Context, s sqlbase.Settle) (int, sqlbase.Outcome, error) {
		for {
			var deleted, left int64
			var seen bool
			if err := d.pool.QueryRow(ctx, releaseSQL, name, owner, int64(s.Token), s.IDs(), s.Counts(), s.Floor, sqlbase.KeptDrops).Scan(&deleted, &left, &seen); err != nil {
				return 0, sqlbase.Uncertain, err
			}
			switch {
			case deleted > 0:
				return 0, sqlbase.Applied, nil
			case left >= 0:
				return int(left), sqlbase.Applied, nil
			case !seen:
				return 0, sqlbase.Gone, nil
			}
			// Neither applied, yet the row was the owner's: a concurrent
			// statement changed it first (see releaseSQL). Nothing was
			// done, so the statement runs again on a new snapshot; each
			// round follows another statement's commit on the row.
		}
	}
}

func (d *pgDriver) inspectRow(ctx context.Context, name string) (driver.Info, error) {
	info := driver.Info{Name: name}
	rows, err := d.pool.Query(ctx, `SELECT owner, label, holds, token, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint
FROM dlock_locks WHERE name = $1 AND expires_at > clock_timestamp()`, name)
	if err != nil {
		return info, pgErr("inspect", err)
	}
	defer rows.Close()
	for rows.Next() {
		var token, left int64
		if err := rows.Scan(&info.Owner, &info.Label, &info.Holds, &token, &left); err != nil {
			return info, pgErr("inspect", err)
		}
		info.Held, info.Token, info.TTL = true, uint64(token), time.Duration(left)*time.Millisecond
	}
	return info, pgErr("inspect", rows.Err())
}
