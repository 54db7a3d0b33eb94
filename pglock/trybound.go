package pglock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// tryBound bounds every lock wait of the rest of the transaction it runs in
// to one second (lock_timeout). A TryLock's statements wait for no holder
// of the lock (NOWAIT, pg_try_advisory_lock), but they could wait for a
// session outside dlock that holds dlock's tables or a row of them (an open
// transaction that inserted the same new name, or locked the name's token
// row, a LOCK TABLE) until their ctx ended, or for good. Among dlock's own
// clients such waits last part of one statement: none of their
// transactions that writes these rows waits for its client between
// statements (tryExec). It runs before the statements it bounds: a
// statement takes its table locks before anything in it runs.
const tryBound = "SELECT set_config('lock_timeout', '1000', true)"

// untryBound puts lock_timeout back for the rest of a transaction that
// tryBound began.
const untryBound = "SELECT set_config('lock_timeout', reset_val, true) FROM pg_settings WHERE name = 'lock_timeout'"

// lockNotAvailable reports whether err is PostgreSQL's lock_not_available:
// a NOWAIT that found the row locked, or a lock_timeout that ran out.
func lockNotAvailable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// tryExec runs sql with args after tryBound, in one message on c (see
// oneMessage): one round trip and one implicit transaction, which the
// server commits after sql. A transaction of several round trips would
// hold the row locks it took while its client is away: paused, it would
// keep other TryLocks waiting; cut off, it would keep the rows locked until
// the server noticed (never, behind a proxy that keeps the connection up).
// So would a pipeline cut between sql and its Sync. It returns sql's rows,
// as text.
func tryExec(ctx context.Context, c *pgconn.PgConn, sql string, args ...any) ([][][]byte, error) {
	res, err := oneMessage(ctx, c, stmt{tryBound, nil}, stmt{sql, args})
	if err != nil {
		return nil, err
	}
	return res[1], nil
}

// token takes a token with sql, one statement that returns it, and args,
// on c, or on a pooled connection if c is nil; a TryLock's (!wait) bounded
// by tryBound (tryExec).
func (d *pgDriver) token(ctx context.Context, wait bool, c *pgxpool.Conn, sql string, args ...any) (uint64, error) {
	if c == nil {
		var err error
		if c, err = d.pool.Acquire(ctx); err != nil {
			return 0, pgErr("token", err)
		}
		defer c.Release()
	}
	if wait {
		var tok int64
		err := c.QueryRow(ctx, sql, args...).Scan(&tok)
		return uint64(tok), pgErr("token", err)
	}
	rows, err := tryExec(ctx, c.Conn().PgConn(), sql, args...)
	if lockNotAvailable(err) {
		return 0, fmt.Errorf("pglock: token: another session has held dlock's tables, or the lock's row in them, for a second: %w", err)
	}
	if err == nil && (len(rows) != 1 || len(rows[0]) != 1) {
		err = errors.New("no token returned")
	}
	if err != nil {
		return 0, pgErr("token", err)
	}
	tok, err := strconv.ParseUint(string(rows[0][0]), 10, 64)
	return tok, pgErr("token", err)
}
