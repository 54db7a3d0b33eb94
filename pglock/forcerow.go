package pglock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// forceWait bounds a row-mode force's own wait for the row.
const forceWait = 5 * time.Second

// forceRow is ForceRelease in row mode. PostgreSQL shows no row lock's
// holder, and the row's xmax, which names it, may be a multixact id that
// equals some unrelated transaction's id; but its lock manager knows whom
// a waiter for the row waits for. So the force queues for the row itself
// (FOR UPDATE, in a transaction of its own on a connection of its own, so
// that a full pool cannot hold it up, for at most forceWait) and ends what
// its wait is blocked by (forceChainSQL). With a token it ends that
// token's holder, if that is what blocks it, once. Without, it goes on
// until it has the row (shared row locks are ended one by one, as its wait
// meets them), but never ends a connection it saw waiting for the row: once
// a holder is ended, a waiter queued ahead of the force that gets the lock
// is a new holder, and the force stops. If it gets the row, nobody holds
// it: it lets go at once.
func (d *pgDriver) forceRow(ctx context.Context, name string, token uint64) error {
	if token != 0 { // the token's holder has released, or never wrote its row
		var named bool
		if err := d.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM dlock_tokens WHERE name = $1 AND token = $2 AND holder_pid IS NOT NULL)",
			name, int64(token)).Scan(&named); err != nil || !named {
			return pgErr("force release", err)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return pgErr("force release: connect", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	pid := conn.PgConn().PID()
	done := make(chan error, 1)
	go func() {
		tx, err := conn.Begin(wctx)
		if err != nil {
			done <- err
			return
		}
		_, err = tx.Exec(wctx, "SELECT set_config('lock_timeout', $1, true)", fmt.Sprint(forceWait.Milliseconds()))
		if err == nil {
			_, err = tx.Exec(wctx, "SELECT 1 FROM dlock_rows WHERE name = $1 FOR UPDATE", name)
		}
		_ = tx.Rollback(context.WithoutCancel(wctx))
		done <- err
	}()
	waited := false
	finish := func(err error) error { // ends the force's own wait
		if !waited {
			stop()
			<-done
		}
		return err
	}
	var seen, ended []int32 // connections seen waiting for the row; those ended
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case werr := <-done: // the force had the row: nobody holds the lock now
			waited = true
			var pe *pgconn.PgError
			if errors.As(werr, &pe) && pe.Code == "55P03" && len(ended) == 0 { // lock_not_available
				return finish(fmt.Errorf("pglock: force release: the row stayed locked for %v, and its wait found nobody to end but waiters and dlock's probes", forceWait))
			}
			if len(ended) > 0 {
				return finish(nil) // ended what held it; what holds it now came after
			}
			return finish(pgErr("force release", werr))
		case <-ctx.Done():
			return finish(ctx.Err())
		case <-tick.C:
		}
		var heads, now, waiters []int32
		skip := append(append([]int32{}, seen...), ended...) // never NULL, which would end nobody
		if err := d.pool.QueryRow(ctx, forceChainSQL, pid, name, int64(token), skip).Scan(&heads, &now, &waiters); err != nil {
			return finish(pgErr("force release", err))
		}
		for _, w := range waiters {
			if !slices.Contains(seen, w) {
				seen = append(seen, w)
			}
		}
		ended = append(ended, now...)
		switch {
		case token != 0 && len(heads) > 0: // the token's holder ended, or another holds it
			return finish(nil)
		case len(now) > 0 || len(heads) == 0:
			continue // the force's wait goes on to the next holder, or has none yet
		}
		dying := false
		for _, h := range heads {
			dying = dying || slices.Contains(ended, h)
		}
		if !dying { // held by waiters of before: new holders, after the holder it found ended or let go
			return finish(nil)
		}
	}
}

// forceChainSQL ends, for the force whose connection is $1 and waits for
// the row of mutex $2, the connections its wait is blocked by. It follows
// pg_blocking_pids through the connections that wait for that row itself
// (a tuple lock on it, wanted or held while waiting for a transaction), to
// the heads: those that do not wait for the row (whatever else they wait
// for) and are no probe (probeMark). It ends the heads not in $4 (waiters
// seen before, connections ended before) that still block the one they
// were found blocking, and, if $3 is a token, only the one that the
// token's row names. It returns the heads, those it ended, and the
// connections waiting for the row.
const forceChainSQL = `WITH RECURSIVE tup AS (
  SELECT (ctid::text::point)[0]::bigint AS page, (ctid::text::point)[1]::int AS tuple FROM dlock_rows WHERE name = $2
), forrow AS (
  SELECT l.pid FROM pg_locks l, tup WHERE l.locktype = 'tuple' AND l.database = ` + thisDatabase + `
    AND l.relation = 'dlock_rows'::regclass AND l.page = tup.page AND l.tuple = tup.tuple
    AND (NOT l.granted OR EXISTS (SELECT 1 FROM pg_locks x WHERE x.pid = l.pid AND NOT x.granted AND x.locktype = 'transactionid'))
), chain(waiter, pid) AS (
  SELECT $1::int, b.pid FROM unnest(pg_blocking_pids($1::int)) AS b(pid) WHERE $1::int IN (SELECT pid FROM forrow)
  UNION
  SELECT c.pid, b.pid FROM chain c, unnest(pg_blocking_pids(c.pid)) AS b(pid) WHERE c.pid IN (SELECT pid FROM forrow)
), heads AS (
  SELECT DISTINCT ON (c.pid) c.waiter, c.pid FROM chain c
  WHERE c.pid NOT IN (SELECT pid FROM forrow)
    AND NOT EXISTS (SELECT 1 FROM pg_locks m WHERE m.pid = c.pid AND m.locktype = 'advisory' AND m.objsubid = 2
      AND (m.classid, m.objid) = (` + markOIDs + `))
), ended AS (
  SELECT h.pid FROM heads h
  WHERE CASE WHEN h.pid <> ALL($4::int[])
    AND ($3 = 0 OR EXISTS (SELECT 1 FROM dlock_tokens t WHERE t.name = $2 AND t.token = $3 AND t.holder_pid = h.pid))
    AND h.pid = ANY(pg_blocking_pids(h.waiter)) THEN pg_terminate_backend(h.pid) ELSE false END
)
SELECT coalesce((SELECT array_agg(pid) FROM heads), '{}'), coalesce((SELECT array_agg(pid) FROM ended), '{}'),
  coalesce((SELECT array_agg(pid) FROM forrow), '{}')`
