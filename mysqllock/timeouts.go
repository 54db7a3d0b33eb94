package mysqllock

// The session timeouts that bound a holding connection by its lease, and a
// TryLock's lock waits.

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"

	"github.com/dlock/dlock/driver"
	"github.com/go-sql-driver/mysql"
)

// sessionTimeouts reads the session settings that setTimeouts sets, in
// its order.
const sessionTimeouts = "@@SESSION.wait_timeout, @@SESSION.net_read_timeout, @@SESSION.net_write_timeout, @@SESSION.innodb_lock_wait_timeout, @@SESSION.lock_wait_timeout"

// setTimeouts sets the session settings that bound a holding connection
// and its lock waits.
const setTimeouts = "SET SESSION wait_timeout = ?, net_read_timeout = ?, net_write_timeout = ?, innodb_lock_wait_timeout = ?, lock_wait_timeout = ?"

// tryWait (seconds) bounds every lock wait of a TryLock, row locks
// (innodb_lock_wait_timeout) and table locks (lock_wait_timeout): its
// statements wait for no holder of the lock (NOWAIT, GET_LOCK(name, 0)),
// but they could wait for a session outside dlock that holds dlock's
// tables or a row of them (an open transaction that inserted the same new
// name, or locked the name's token row, a LOCK TABLES) until their ctx
// ended. Among dlock's own clients such waits last one short statement.
const tryWait = 1

// lockTimedOut reports whether err is a lock wait that timed out
// (ER_LOCK_WAIT_TIMEOUT: a row lock's or a table's metadata lock's).
func lockTimedOut(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1205
}

// poolToken takes r's token on a pooled connection, outside the lock's
// transaction (row mode); a TryLock's with its lock waits bounded by
// tryWait, put back before the connection returns to the pool.
func (d *myDriver) poolToken(ctx context.Context, r driver.Request, connID uint64) (uint64, error) {
	if r.Wait {
		return nextToken(ctx, d.db, r, connID)
	}
	c, err := d.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	// One statement keeps the session's values in user variables and sets
	// the bounds; the same pattern as the kinds' connections (kinds.go).
	const bound = "SET @dlock_ilwt = @@SESSION.innodb_lock_wait_timeout, @dlock_lwt = @@SESSION.lock_wait_timeout, SESSION innodb_lock_wait_timeout = ?, lock_wait_timeout = ?"
	if _, err := c.ExecContext(ctx, bound, tryWait, tryWait); err != nil {
		return 0, err
	}
	tok, err := nextToken(ctx, c, r, connID)
	const unbound = "SET SESSION innodb_lock_wait_timeout = @dlock_ilwt, lock_wait_timeout = @dlock_lwt"
	if _, rerr := c.ExecContext(ctx, unbound); rerr != nil {
		_ = c.Raw(func(any) error { return sqldriver.ErrBadConn }) // not fit for the pool
		if err == nil {
			err = rerr
		}
	}
	return tok, err
}

// setIdle sets the session settings that bound a holding connection's idle
// time by its lease (setTimeouts' first three).
const setIdle = "SET SESSION wait_timeout = ?, net_read_timeout = ?, net_write_timeout = ?"
