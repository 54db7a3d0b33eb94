package pglock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/jackc/pgx/v5"
)

// Table mode's acquire of a read, write or permit hold in one message after
// its BEGIN (see tryFast); kinds.go holds the rest of table mode's kinds.

// permitGrantSQL grants a permit in the acquire's second round trip, when
// the verdict the statement itself can check is a grant (sqlbase.Decide's
// for a permit: no live hold of the owner's, fewer live holds than the
// permits asked for, and those held with as many), and returns its token
// and how long after the server received the message the hold's life began
// (µs, rounded down). The lease counts its validity from its send plus
// that delay: after a wait for the state row, which is not spent of it,
// and never after the hold's start on the server, since the server got the
// message after it was sent, so the lease never outlasts the hold. The
// hold's start is read once (c), for its expiry and for that delay.
const permitGrantSQL = `WITH c AS (SELECT clock_timestamp() AS at),
live AS (SELECT owner FROM dlock_holds, c WHERE name = $1 AND family = $2 AND expires_at > c.at),
t AS (
  UPDATE dlock_kinds SET token = token + 1, lim = $3
  WHERE name = $1 AND family = $2
    AND NOT EXISTS (SELECT 1 FROM live WHERE owner = $4)
    AND (SELECT count(*) FROM live) < $3
    AND (lim = $3 OR NOT EXISTS (SELECT 1 FROM live))
  RETURNING token
)
INSERT INTO dlock_holds (name, family, owner, kind, holds, token, expires_at, label)
SELECT $1, $2, $4, $5, 1, t.token, c.at + $6 * interval '1 millisecond', $7 FROM t, c
RETURNING token, floor(extract(epoch FROM (expires_at - $6 * interval '1 millisecond') - statement_timestamp()) * 1000000)::bigint`

// rwGrantSQL grants a read ($4 = Shared) or write ($4 = Write, $7) hold as
// permitGrantSQL grants a permit: when the verdict the statement itself can
// check is a grant (sqlbase.Decide's for a read-write lock: no live hold of
// the owner's; no live hold at all for a write, none of a writer for a
// read; and nobody waiting ahead of the owner who is a writer, or of any
// kind for a writer, ahead meaning all waiters when the owner has no
// record). The waiting records it reads are the ones left after the
// message's waitExpireSQL, and only acquires holding the state row write
// them. A grant deletes the owner's waiting record (d: a data-modifying
// WITH runs once, whatever reads it). It returns what permitGrantSQL does.
const rwGrantSQL = `WITH c AS (SELECT clock_timestamp() AS at),
live AS (SELECT owner, kind FROM dlock_holds, c WHERE name = $1 AND family = $2 AND expires_at > c.at),
mine AS (SELECT seq FROM dlock_waits WHERE name = $1 AND family = $2 AND owner = $3),
t AS (
  UPDATE dlock_kinds SET token = token + 1
  WHERE name = $1 AND family = $2
    AND NOT EXISTS (SELECT 1 FROM live WHERE owner = $3 OR $4 = $7 OR kind = $7)
    AND NOT EXISTS (SELECT 1 FROM dlock_waits w WHERE w.name = $1 AND w.family = $2 AND w.owner <> $3
      AND (NOT EXISTS (SELECT 1 FROM mine) OR w.seq < (SELECT seq FROM mine))
      AND ($4 = $7 OR w.kind = $7))
  RETURNING token
),
d AS (DELETE FROM dlock_waits WHERE name = $1 AND family = $2 AND owner = $3 AND EXISTS (SELECT 1 FROM t))
INSERT INTO dlock_holds (name, family, owner, kind, holds, token, expires_at, label)
SELECT $1, $2, $3, $4, 1, t.token, c.at + $5 * interval '1 millisecond', $6 FROM t, c
RETURNING token, floor(extract(epoch FROM (expires_at - $5 * interval '1 millisecond') - statement_timestamp()) * 1000000)::bigint`

// ownHoldSQL is the condition that keeps a refused request's queueing
// (kindQueueSQL, kindRequeueSQL) out of the same message as its grant:
// after a grant, or when the owner holds already (a re-entry, or a hold of
// the other kind), the owner has a live hold, and nothing is queued.
const ownHoldSQL = ` AND NOT EXISTS (SELECT 1 FROM dlock_holds h WHERE h.name = $1 AND h.family = $2 AND h.owner = $3 AND h.expires_at > clock_timestamp())`

// rwQueueSQL and rwRequeueSQL are kindQueueSQL and kindRequeueSQL, run
// only if the message's grant did not happen (ownHoldSQL).
var (
	rwQueueSQL   = strings.Replace(kindQueueSQL, "\n  RETURNING seq", ownHoldSQL+"\n  RETURNING seq", 1)
	rwRequeueSQL = kindRequeueSQL + ownHoldSQL
)

// tryFast runs a read, write or permit acquire transaction in two round
// trips: the bounded BEGIN, then one message that locks the state row,
// drops the expired holds (and waiting records), reads what the verdict
// needs, grants if the statement finds it may (permitGrantSQL,
// rwGrantSQL), queues a refused read or write request that waits, and
// commits. The state row is locked only while the server runs that
// message, never across a client's round trip or its scheduling: on a
// loaded machine a starved client held it, and every other acquire of the
// lock behind it. A verdict of Reenter is returned with nothing written,
// for tryKindTx to write.
func (d *pgDriver) tryFast(ctx context.Context, r driver.Request) (driver.Grant, sqlbase.Verdict, int, error) {
	fam := int16(r.Kind.Family())
	ttl := r.TTL.Milliseconds()
	rw := r.Kind != driver.Permit
	stmts := []stmt{{kindStateSQL, []any{r.Name, fam}}, {kindLockSQL, []any{r.Name, fam}}, {kindExpireSQL, []any{r.Name, fam}}}
	if rw {
		stmts = append(stmts, stmt{waitExpireSQL, []any{r.Name, fam}})
	}
	liveAt := len(stmts)
	stmts = append(stmts, stmt{kindLiveSQL, []any{r.Name, fam, r.Owner}})
	if rw {
		stmts = append(stmts, stmt{kindWaitsSQL, []any{r.Name, fam, r.Owner}})
	}
	grantAt := len(stmts)
	if rw {
		stmts = append(stmts, stmt{rwGrantSQL, []any{r.Name, fam, r.Owner, int16(r.Kind), ttl, r.Label, int16(driver.Write)}})
		if !r.Try { // a single attempt keeps no place
			life := sqlbase.WaitLife(r.TTL).Milliseconds()
			stmts = append(stmts,
				stmt{rwQueueSQL, []any{r.Name, fam, r.Owner, int16(r.Kind), life}},
				stmt{rwRequeueSQL, []any{r.Name, fam, r.Owner, life}})
		}
	} else {
		stmts = append(stmts, stmt{permitGrantSQL, []any{r.Name, fam, int32(r.Limit), r.Owner, int16(r.Kind), ttl, r.Label}})
	}
	stmts = append(stmts, stmt{"COMMIT", nil})
	var g driver.Grant
	var verdict sqlbase.Verdict
	var limit int64
	err := d.inKindTx(ctx, r, func(conn *pgx.Conn) error {
		sent := time.Now()
		res, err := oneMessage(ctx, conn.PgConn(), stmts...)
		if err != nil {
			return err
		}
		var holds []sqlbase.KindHold
		if limit, holds, err = stateOf(r, res, liveAt); err != nil {
			return err
		}
		var waits []sqlbase.KindWait
		if rw {
			if waits, err = textKindWaits(res[liveAt+1]); err != nil {
				return err
			}
		}
		verdict = sqlbase.Decide(r, holds, waits, int(limit))
		if granted := res[grantAt]; len(granted) == 1 {
			// The statement's check is the one made under the row lock,
			// and a later one: a hold read as live may have expired since.
			n, err := textInts(granted[0], 0, 1)
			if err != nil {
				return err
			}
			verdict = sqlbase.Grant
			g = driver.Grant{Acquired: true, Token: uint64(n[0]), Holds: 1, Since: sent.Add(time.Duration(max(n[1], 0)) * time.Microsecond)}
			return nil
		}
		switch verdict {
		case sqlbase.Grant: // the statement saw fewer holds, never more
			return fmt.Errorf("pglock: a %s hold of %q was decided a grant, and not granted", r.Kind, r.Name)
		case sqlbase.Refuse:
			g.Retry = sqlbase.Retry(r, holds)
		}
		return nil
	})
	return g, verdict, int(limit), err
}
