package pglock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Read-write locks and semaphores, table mode (see the package doc).

const kindsSchema = `
CREATE TABLE IF NOT EXISTS dlock_kinds (
  name   text NOT NULL,
  family smallint NOT NULL,
  token  bigint NOT NULL DEFAULT 0,
  seq    bigint NOT NULL DEFAULT 0,
  lim    integer NOT NULL DEFAULT 0,
  PRIMARY KEY (name, family)
);
CREATE TABLE IF NOT EXISTS dlock_holds (
  name       text NOT NULL,
  family     smallint NOT NULL,
  owner      text NOT NULL,
  kind       smallint NOT NULL,
  holds      integer NOT NULL,
  token      bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  label      text NOT NULL DEFAULT '',
  pid        integer,
  PRIMARY KEY (name, family, owner)
);
CREATE TABLE IF NOT EXISTS dlock_waits (
  name       text NOT NULL,
  family     smallint NOT NULL,
  owner      text NOT NULL,
  kind       smallint NOT NULL,
  seq        bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (name, family, owner)
);
`

// kindsNote is why row and session modes hold no semaphores (and row mode
// no read-write locks).
const (
	rowKindsNote = "row mode holds a row lock, and PostgreSQL grants FOR SHARE to new readers past a waiting " +
		"FOR UPDATE, so writers could starve; there is no blocking wait for one of N rows either: use mode=table"
	sessionKindsNote = "session mode holds advisory locks, which have no blocking wait for one of N locks " +
		"and no room for a permit count: use mode=table for semaphores"
)

// acquireKind decides a read, write or permit request in one transaction
// that locks the lock's state row first, so that the holds and waiting
// records it reads are those it decides on.
func (d *pgDriver) acquireKind(ctx context.Context, r driver.Request) (driver.Grant, error) {
	return sqlbase.AcquireKind(ctx, "pglock", r, func() (driver.Grant, sqlbase.Verdict, int, error) { return d.tryKind(ctx, r) },
		retryable, pgErr)
}

// retryable says an acquire transaction failed in a way that its next
// attempt fixes: a deadlock (40P01), or the owner's hold, seen expired by
// the grant after the transaction's clean-up ran, still in the way of the
// new one (23505: the next attempt's clean-up drops it; an adversary pass
// hit it with WithOwner and short TTLs).
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "23505")
}

// The statements of an acquire's second round trip (its first began the
// transaction): make sure the state row exists, lock it, drop the expired
// holds and waiting records, and read those left.
const (
	kindStateSQL  = `INSERT INTO dlock_kinds (name, family) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	kindLockSQL   = `SELECT lim FROM dlock_kinds WHERE name = $1 AND family = $2 FOR UPDATE`
	kindExpireSQL = `DELETE FROM dlock_holds WHERE name = $1 AND family = $2 AND expires_at <= clock_timestamp()`
	waitExpireSQL = `DELETE FROM dlock_waits WHERE name = $1 AND family = $2 AND expires_at <= clock_timestamp()`
	// kindLiveSQL reads of the live holds what the verdict needs, and no
	// more: the requester's own ($3), and the others' summed up by kind,
	// with an empty owner (how many, the first to end). The rows are read
	// while the state row is locked, and a client that stops reading them
	// holds it until the server's send gives up: with a row per hold,
	// 30,000 readers' holds made megabytes (an adversary pass), and every
	// acquire of a lock with n holders read n rows. Now at most three.
	kindLiveSQL = `WITH live AS (SELECT owner, kind, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint AS ms
FROM dlock_holds WHERE name = $1 AND family = $2 AND expires_at > clock_timestamp())
SELECT owner, kind, ms, 1 FROM live WHERE owner = $3
UNION ALL SELECT '', kind, min(ms), count(*) FROM live WHERE owner <> $3 GROUP BY kind`
	// kindWaitsSQL reads the requester's own waiting record and, of the
	// others, the first in line of each kind: whether anybody of a kind
	// waits ahead is all the verdict asks of them.
	kindWaitsSQL = `SELECT owner, kind, seq FROM dlock_waits WHERE name = $1 AND family = $2 AND owner = $3
UNION ALL SELECT '', kind, min(seq) FROM dlock_waits WHERE name = $1 AND family = $2 AND owner <> $3 GROUP BY kind`
)

// kindHoldsSQL reads the live holds of a read-write lock or semaphore
// whole, for Inspect.
const kindHoldsSQL = `SELECT owner, label, kind, holds, token,
  (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint
FROM dlock_holds WHERE name = $1 AND family = $2 AND expires_at > clock_timestamp()`

// The statements of its third round trip, by verdict, before its COMMIT.
const (
	// kindGrantSQL takes the next token and records the hold with it.
	kindGrantSQL = `WITH t AS (
  UPDATE dlock_kinds SET token = token + 1, lim = CASE WHEN $3::integer > 0 THEN $3::integer ELSE lim END
  WHERE name = $1 AND family = $2 RETURNING token
)
INSERT INTO dlock_holds (name, family, owner, kind, holds, token, expires_at, label)
SELECT $1, $2, $4, $5, 1, t.token, clock_timestamp() + $6 * interval '1 millisecond', $7 FROM t
RETURNING token`
	kindUnwaitSQL  = `DELETE FROM dlock_waits WHERE name = $1 AND family = $2 AND owner = $3`
	kindReenterSQL = `UPDATE dlock_holds SET holds = holds + 1,
  expires_at = greatest(expires_at, clock_timestamp() + $4 * interval '1 millisecond')
WHERE name = $1 AND family = $2 AND owner = $3 RETURNING token, holds`
	// kindQueueSQL keeps a refused request's place in line: its record's
	// number, or the next one; kindRequeueSQL renews the record's life.
	kindQueueSQL = `WITH s AS (
  UPDATE dlock_kinds SET seq = seq + 1 WHERE name = $1 AND family = $2
    AND NOT EXISTS (SELECT 1 FROM dlock_waits WHERE name = $1 AND family = $2 AND owner = $3)
  RETURNING seq
)
INSERT INTO dlock_waits (name, family, owner, kind, seq, expires_at)
SELECT $1, $2, $3, $4, s.seq, clock_timestamp() + $5 * interval '1 millisecond' FROM s
ON CONFLICT (name, family, owner) DO NOTHING`
	kindRequeueSQL = `UPDATE dlock_waits SET expires_at = clock_timestamp() + $4 * interval '1 millisecond'
WHERE name = $1 AND family = $2 AND owner = $3`
)

// tryKind runs one acquire transaction. A permit's is two round trips (see
// tryPermit); a read or write hold's, or a permit's re-entry, three:
// tryKindTx.
func (d *pgDriver) tryKind(ctx context.Context, r driver.Request) (driver.Grant, sqlbase.Verdict, int, error) {
	if r.Kind == driver.Permit {
		g, verdict, limit, err := d.tryPermit(ctx, r)
		if err != nil || verdict != sqlbase.Reenter {
			return g, verdict, limit, err
		}
	}
	return d.tryKindTx(ctx, r)
}

// tryKindTx runs one acquire transaction, in three round trips: the first
// begins it, bounded (one simple query, so that no session is ever in it
// unbounded); the second (one message, see oneMessage) locks the state row
// and reads the requester's own hold and waiting record and the others'
// summed up by kind; the third writes what the verdict needs and commits. The state row is locked while its client
// decides, once: a transaction of a round trip per statement (as this was)
// held it across eight, and on a loaded machine the acquires of a
// contended lock queued behind each other's locked state row for seconds,
// long enough for waiting records to lapse while their owners' attempts
// queued, so that no head of the line was ever granted.
func (d *pgDriver) tryKindTx(ctx context.Context, r driver.Request) (driver.Grant, sqlbase.Verdict, int, error) {
	fam := int16(r.Kind.Family())
	var g driver.Grant
	var verdict sqlbase.Verdict
	var limit int64
	err := d.inKindTx(ctx, r, func(conn *pgx.Conn) error {
		res, err := oneMessage(ctx, conn.PgConn(),
			stmt{kindStateSQL, []any{r.Name, fam}},
			stmt{kindLockSQL, []any{r.Name, fam}},
			stmt{kindExpireSQL, []any{r.Name, fam}},
			stmt{waitExpireSQL, []any{r.Name, fam}},
			stmt{kindLiveSQL, []any{r.Name, fam, r.Owner}},
			stmt{kindWaitsSQL, []any{r.Name, fam, r.Owner}})
		if err != nil {
			return err
		}
		var holds []sqlbase.KindHold
		if limit, holds, err = stateOf(r, res, 4); err != nil {
			return err
		}
		waits, err := textKindWaits(res[5])
		if err != nil {
			return err
		}
		verdict = sqlbase.Decide(r, holds, waits, int(limit))
		ttl := r.TTL.Milliseconds()
		var writes []stmt
		switch verdict {
		case sqlbase.Grant:
			writes = append(writes,
				stmt{kindGrantSQL, []any{r.Name, fam, int32(r.Limit), r.Owner, int16(r.Kind), ttl, r.Label}},
				stmt{kindUnwaitSQL, []any{r.Name, fam, r.Owner}})
		case sqlbase.Reenter:
			writes = append(writes, stmt{kindReenterSQL, []any{r.Name, fam, r.Owner, ttl}})
		case sqlbase.Refuse:
			g.Retry = sqlbase.Retry(r, holds)
			if r.Kind != driver.Permit && !r.Try { // a single attempt keeps no place
				life := sqlbase.WaitLife(r.TTL).Milliseconds()
				writes = append(writes,
					stmt{kindQueueSQL, []any{r.Name, fam, r.Owner, int16(r.Kind), life}},
					stmt{kindRequeueSQL, []any{r.Name, fam, r.Owner, life}})
			}
		}
		// A hold written now expires its TTL after the server runs this
		// message, so its validity counts from the send: not from the
		// attempt's start, which a wait for the state row (behind a
		// client paused in its transaction, up to the idle bound) may have
		// put a TTL in the past, making a sound grant look too late.
		since := time.Now()
		res, err = oneMessage(ctx, conn.PgConn(), append(writes, stmt{"COMMIT", nil})...)
		if err != nil {
			return err
		}
		switch {
		case verdict == sqlbase.Grant && len(res[0]) == 1:
			tok, err := textInt(res[0][0][0])
			g = driver.Grant{Acquired: true, Token: uint64(tok), Holds: 1, Since: since}
			return err
		case verdict == sqlbase.Grant:
			return fmt.Errorf("pglock: a grant of %q wrote %d holds", r.Name, len(res[0]))
		case verdict == sqlbase.Reenter && len(res[0]) == 0:
			return sqlbase.ErrHoldGone // released since the holds were read
		case verdict == sqlbase.Reenter:
			tok, err := textInt(res[0][0][0])
			if err != nil {
				return err
			}
			holds, err := textInt(res[0][0][1])
			g.Acquired, g.Token, g.Holds, g.Since = true, uint64(tok), int(holds), since
			return err
		}
		return nil
	})
	return g, verdict, int(limit), err
}

// inKindTx runs fn on a pooled connection in an acquire's transaction,
// begun bounded (see boundedTx): it locks the lock's state row, which a
// client paused or cut off before its commit would otherwise hold from
// every other for good. By the TTL at most sqlbase.MaxTxIdle: a paused
// requester with a TTL of an hour held it an hour. What fn leaves of the
// transaction is rolled back.
func (d *pgDriver) inKindTx(ctx context.Context, r driver.Request, fn func(conn *pgx.Conn) error) error {
	return d.onConn(ctx, func(c *pgxpool.Conn) error {
		conn := c.Conn()
		defer abortTx(conn)
		begin := boundedTx(strconv.FormatInt(sqlbase.IdleMillis(sqlbase.TxIdle(r.TTL)), 10)).BeginQuery
		if _, err := conn.PgConn().Exec(ctx, begin).ReadAll(); err != nil {
			return err
		}
		return fn(conn)
	})
}

// stateOf reads an acquire's second message's results: the stored limit
// from the state row's lock (statement 1) and the holds (statement at).
func stateOf(r driver.Request, res [][][][]byte, at int) (int64, []sqlbase.KindHold, error) {
	if len(res[1]) != 1 {
		return 0, nil, fmt.Errorf("pglock: the state row of %q: %d rows", r.Name, len(res[1]))
	}
	limit, err := textInt(res[1][0][0])
	if err != nil {
		return 0, nil, err
	}
	holds, err := textKindHolds(res[at])
	return limit, holds, err
}

// abortTx rolls back what a failed acquire left of its transaction, so
// that its connection goes back to the pool idle.
func abortTx(conn *pgx.Conn) {
	if conn.IsClosed() || conn.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = conn.Exec(ctx, "ROLLBACK")
}

// kindHolds reads the live holds of a read-write lock or semaphore.
func (d *pgDriver) kindHolds(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, name string, fam int) ([]sqlbase.KindHold, error) {
	rows, err := q.Query(ctx, kindHoldsSQL, name, fam)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanKindHold)
}

// scanKindHold scans a row of kindHoldsSQL.
func scanKindHold(row pgx.CollectableRow) (sqlbase.KindHold, error) {
	var h sqlbase.KindHold
	var kind int16
	var tok, left int64
	err := row.Scan(&h.Owner, &h.Label, &kind, &h.Holds, &tok, &left)
	h.Kind, h.Token, h.TTLLeft = driver.Kind(kind), uint64(tok), time.Duration(left)*time.Millisecond
	return h, err
}

// textKindHolds reads the rows of kindLiveSQL as oneMessage returns them.
func textKindHolds(rows [][][]byte) ([]sqlbase.KindHold, error) {
	holds := make([]sqlbase.KindHold, len(rows))
	for i, row := range rows {
		n, err := textInts(row, 1, 2, 3)
		if err != nil {
			return nil, err
		}
		holds[i] = sqlbase.KindHold{Owner: string(row[0]), Kind: driver.Kind(n[0]), TTLLeft: time.Duration(n[1]) * time.Millisecond, Owners: int(n[2])}
	}
	return holds, nil
}

// textKindWaits reads the rows of kindWaitsSQL as oneMessage returns them.
func textKindWaits(rows [][][]byte) ([]sqlbase.KindWait, error) {
	waits := make([]sqlbase.KindWait, len(rows))
	for i, row := range rows {
		n, err := textInts(row, 1, 2)
		if err != nil {
			return nil, err
		}
		waits[i] = sqlbase.KindWait{Owner: string(row[0]), Kind: driver.Kind(n[0]), Seq: uint64(n[1])}
	}
	return waits, nil
}

// renewKindsSQL extends every live hold of a batch in one statement and
// returns the batch positions it extended (never earlier, as renewSQL).
const renewKindsSQL = `
UPDATE dlock_holds AS h SET expires_at = greatest(h.expires_at, clock_timestamp() + t.ttl * interval '1 millisecond')
FROM unnest($1::text[], $2::smallint[], $3::text[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS t(name, family, owner, token, ttl, i)
WHERE h.name = t.name AND h.family = t.family AND h.owner = t.owner AND h.token = t.token AND h.expires_at > clock_timestamp()
RETURNING t.i`

func (d *pgDriver) renewKinds(ctx context.Context, batch []driver.Held, res []driver.RenewResult, idx []int) {
	n := len(idx)
	names, owners := make([]string, n), make([]string, n)
	fams := make([]int16, n)
	tokens, ttls := make([]int64, n), make([]int64, n)
	for j, i := range idx {
		h := batch[i]
		names[j], fams[j], owners[j], tokens[j], ttls[j] = h.Name, int16(h.Kind.Family()), h.Owner, int64(h.Token), h.TTL.Milliseconds()
	}
	renewed, err := renewedSet[int64](d.pool.Query(ctx, renewKindsSQL, names, fams, owners, tokens, ttls))
	for j, i := range idx {
		switch {
		case err != nil:
			res[i].Err = pgErr("renew", err)
		case !renewed[int64(j+1)]:
			res[i].Err = fmt.Errorf("pglock: %w: the hold expired or was deleted", dlock.ErrLeaseLost)
		}
	}
}

// releaseKindSQL drops $5 holds, deleting the row (and notifying waiters)
// when none are left. Returns rows deleted, the holds left (-1: not held)
// and whether the statement's snapshot saw the live row of that owner and
// token.
//
// As releaseSQL's, its DELETE and UPDATE choose between them on the
// statement's snapshot, and each re-checks its condition on the row's
// latest version when a concurrent statement (a re-entry, another release
// of the owner's holds) changed the row first (READ COMMITTED): then
// neither may apply although the row is still the owner's. The third
// column tells that case from a row that is gone, and releaseKind runs the
// statement again.
const releaseKindSQL = `
WITH d AS (
  DELETE FROM dlock_holds WHERE name = $1 AND family = $2 AND owner = $3 AND token = $4 AND holds <= $5
    AND expires_at > clock_timestamp() RETURNING name
), u AS (
  UPDATE dlock_holds SET holds = holds - $5
  WHERE name = $1 AND family = $2 AND owner = $3 AND token = $4 AND holds > $5 AND expires_at > clock_timestamp() RETURNING holds
), n AS (
  SELECT pg_notify('dlock_release_' || 'dlock_locks'::regclass::oid::text, md5(name)) FROM d
)
SELECT (SELECT count(*) FROM d) + (SELECT count(*) FROM n) * 0, coalesce((SELECT holds FROM u), -1),
  EXISTS (SELECT 1 FROM dlock_holds WHERE name = $1 AND family = $2 AND owner = $3 AND token = $4 AND expires_at > clock_timestamp())`

func (d *pgDriver) releaseKind(ctx context.Context, h driver.Held, count int) (int, error) {
	if h.Token == 0 { // a wait given up: drop its place in line, and wake those behind it
		_, err := d.pool.Exec(ctx, `WITH d AS (
  DELETE FROM dlock_waits WHERE name = $1 AND family = $2 AND owner = $3 RETURNING name
) SELECT pg_notify('dlock_release_' || 'dlock_locks'::regclass::oid::text, md5(name)) FROM d`, h.Name, int(h.Kind.Family()), h.Owner)
		if err != nil {
			return 0, pgErr("release", err)
		}
		return 0, fmt.Errorf("pglock: release: %w: a wait given up holds nothing", dlock.ErrLeaseLost)
	}
	for {
		var deleted, left int64
		var seen bool
		err := d.pool.QueryRow(ctx, releaseKindSQL, h.Name, int(h.Kind.Family()), h.Owner, int64(h.Token), count).Scan(&deleted, &left, &seen)
		switch {
		case err != nil:
			return 0, pgErr("release", err)
		case deleted > 0:
			return 0, nil
		case left >= 0:
			return int(left), nil
		case !seen:
			return 0, fmt.Errorf("pglock: release: %w: the hold expired or was deleted", dlock.ErrLeaseLost)
		}
		// Neither applied, yet the row was the owner's: a concurrent
		// statement changed it first (see releaseKindSQL). Nothing was
		// done, so the statement runs again on a new snapshot; each round
		// follows another statement's commit on the row.
	}
}

// kindTokenSQL takes the next token of the read-write lock $1 on the
// holding connection (session mode, no transaction: it commits at once,
// so a holder that dies never gives its token to the next) and records the
// hold of owner $2, kind $3 in dlock_holds with the backend's pid, for
// Inspect, which counts a row only while that pid holds the advisory lock.
// Rows of holders that died are dropped here.
const kindTokenSQL = `WITH t AS (
  INSERT INTO dlock_kinds AS k (name, family, token) VALUES ($1, 1, 1)
  ON CONFLICT (name, family) DO UPDATE SET token = k.token + 1
  RETURNING token
), stale AS (
  DELETE FROM dlock_holds h WHERE h.name = $1 AND h.family = 1 AND h.owner <> $2
    AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = h.pid)
), h AS (
  INSERT INTO dlock_holds (name, family, owner, kind, holds, token, expires_at, label, pid)
  SELECT $1, 1, $2, $3, 1, t.token, 'infinity', '', pg_backend_pid() FROM t
  ON CONFLICT (name, family, owner) DO UPDATE SET kind = EXCLUDED.kind, holds = 1, token = EXCLUDED.token,
    expires_at = EXCLUDED.expires_at, pid = EXCLUDED.pid
)
SELECT token FROM t`
