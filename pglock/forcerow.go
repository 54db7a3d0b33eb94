package pglock

import (
	"context"
	"errors"
	"fmt"
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
// (FOR UPDATE, in a transaction of its own, for at most forceWait) and ends
// the connections its wait is blocked by (forceChainSQL), once, and stops
// waiting: a waiter queued ahead of it that gets the lock then is a new
// holder, and is kept. If the force gets the row first, nobody held it; it
// lets go at once.
func (d *pgDriver) forceRow(ctx context.Context, name string, token uint64) error {
	if token != 0 { // the token's holder has released, or never wrote its row
		var named bool
		if err := d.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM dlock_tokens WHERE name = $1 AND token = $2 AND holder_pid IS NOT NULL)",
			name, int64(token)).Scan(&named); err != nil || !named {
			return pgErr("force release", err)
		}
	}
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return pgErr("force release", err)
	}
	defer conn.Release()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	pid := conn.Conn().PgConn().PID()
	done := make(chan error, 1)
	go func() {
		tx, err := conn.BeginTx(wctx, pgx.TxOptions{})
		if err != nil {
			done <- err
			return
		}
		_, err = tx.Exec(wctx, "SELECT set_config('lock_timeout', $1, true)", fmt.Sprint(forceWait.Milliseconds()))
		if err == nil {
			_, err = tx.Exec(wctx, "SELECT 1 FROM dlock_rows WHERE name = $1 FOR UPDATE", name)
		}
		if rerr := tx.Rollback(context.WithoutCancel(wctx)); err == nil {
			err = rerr
		}
		done <- err
	}()
	var werr error
	waited := false
	finish := func(err error) error { // ends the force's wait; a connection it cut is not pooled again
		if !waited {
			stop()
			werr = <-done
		}
		if werr != nil {
			_ = conn.Conn().Close(context.Background())
		}
		return err
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case werr = <-done: // the force had the row: nobody holds the lock now
			waited = true
			var pe *pgconn.PgError
			if errors.As(werr, &pe) && pe.Code == "55P03" { // lock_not_available
				return finish(fmt.Errorf("pglock: force release: the row stayed locked for %v by connections that wait themselves, or dlock's probes", forceWait))
			}
			return finish(pgErr("force release", werr))
		case <-ctx.Done():
			return finish(ctx.Err())
		case <-tick.C:
		}
		var heads, ended int
		if err := d.pool.QueryRow(ctx, forceChainSQL, pid, name, int64(token)).Scan(&heads, &ended); err != nil {
			return finish(pgErr("force release (pg_terminate_backend needs membership in the holder's role, or pg_signal_backend)", err))
		}
		if heads > 0 { // ended, or held by another than the token's holder
			return finish(nil)
		}
	}
}

// forceChainSQL ends, for the force whose connection is $1 and waits for
// the row of mutex $2, the connections its wait is blocked by: through the
// chain of waiters queued ahead of it (each waits for the row, a tuple or
// a transaction lock), those that wait for nothing themselves and are no
// probe (probeMark), and, if $3 is a token, only the one that the token's
// row names. It returns how many it found, and how many it ended.
const forceChainSQL = `WITH RECURSIVE chain(pid) AS (
  SELECT b.pid FROM unnest(pg_blocking_pids($1::int)) AS b(pid)
  WHERE EXISTS (SELECT 1 FROM pg_locks w WHERE w.pid = $1::int AND NOT w.granted AND w.locktype IN ('tuple', 'transactionid'))
  UNION
  SELECT b.pid FROM chain c, unnest(pg_blocking_pids(c.pid)) AS b(pid)
  WHERE EXISTS (SELECT 1 FROM pg_locks w WHERE w.pid = c.pid AND NOT w.granted AND w.locktype IN ('tuple', 'transactionid'))
), heads AS (
  SELECT c.pid FROM chain c
  WHERE NOT EXISTS (SELECT 1 FROM pg_locks w WHERE w.pid = c.pid AND NOT w.granted)
    AND NOT EXISTS (SELECT 1 FROM pg_locks m WHERE m.pid = c.pid AND m.locktype = 'advisory' AND m.objsubid = 2
      AND (m.classid, m.objid) = (` + markOIDs + `))
)
SELECT count(*), coalesce(sum(CASE WHEN $3 = 0 OR EXISTS (SELECT 1 FROM dlock_tokens t WHERE t.name = $2 AND t.token = $3 AND t.holder_pid = h.pid)
  THEN pg_terminate_backend(h.pid)::int ELSE 0 END), 0) FROM heads h`
