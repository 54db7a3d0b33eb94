package pglock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/jackc/pgx/v5"
)

// A semaphore's permit, table mode: acquired in one message after its
// BEGIN (see tryPermit); kinds.go holds the rest of table mode's kinds.

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

// tryPermit runs a permit's acquire transaction in two round trips: the
// bounded BEGIN, then one message that locks the state row, drops the
// expired holds, reads what the verdict needs, grants if the statement
// finds it may (permitGrantSQL), and commits. The state row is locked only
// while the server runs that message, never across a client's round trip
// or its scheduling: on a loaded machine a starved client held it, and
// every other acquire of the semaphore behind it. A verdict of Reenter is
// returned with nothing written, for tryKindTx to write.
func (d *pgDriver) tryPermit(ctx context.Context, r driver.Request) (driver.Grant, sqlbase.Verdict, int, error) {
	fam := int16(r.Kind.Family())
	var g driver.Grant
	var verdict sqlbase.Verdict
	var limit int64
	err := d.inKindTx(ctx, r, func(conn *pgx.Conn) error {
		sent := time.Now()
		res, err := oneMessage(ctx, conn.PgConn(),
			stmt{kindStateSQL, []any{r.Name, fam}},
			stmt{kindLockSQL, []any{r.Name, fam}},
			stmt{kindExpireSQL, []any{r.Name, fam}},
			stmt{kindLiveSQL, []any{r.Name, fam, r.Owner}},
			stmt{permitGrantSQL, []any{r.Name, fam, int32(r.Limit), r.Owner, int16(r.Kind), r.TTL.Milliseconds(), r.Label}},
			stmt{"COMMIT", nil})
		if err != nil {
			return err
		}
		var holds []sqlbase.KindHold
		if limit, holds, err = stateOf(r, res, 3); err != nil {
			return err
		}
		verdict = sqlbase.Decide(r, holds, nil, int(limit))
		if granted := res[4]; len(granted) == 1 {
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
			return fmt.Errorf("pglock: a permit of %q was decided a grant, and not granted", r.Name)
		case sqlbase.Refuse:
			g.Retry = sqlbase.Retry(r, holds)
		}
		return nil
	})
	return g, verdict, int(limit), err
}
