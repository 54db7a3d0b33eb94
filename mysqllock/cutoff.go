package mysqllock

import (
	"context"
	"database/sql"
)

// onConn runs f, the table mode's acquire statements, on a pooled
// connection of its own. When ctx ends in f's round trip, go-sql-driver
// closes the connection without waiting for the reply, but the server goes
// on: the statement may still take the lock, after the error has returned
// and after dlock's give-up path looked for (and did not find) a hold to
// undo, leaving the name held by a row nobody will release until its TTL.
// So on such a cut-off onConn ends the connection's server thread and
// waits for it to go (endConn): from then on the store shows whatever the
// statement did, and the give-up path that follows removes it.
//
// Knowing the thread costs a round trip (CONNECTION_ID()), paid only when
// ctx can end.
func (d *myDriver) onConn(ctx context.Context, f func(ctx context.Context, c *sql.Conn) error) error {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	var id uint64
	if ctx.Done() != nil {
		if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			_ = conn.Close()
			return err
		}
	}
	err = f(ctx, conn)
	cut := err != nil && id != 0 && connClosed(conn) // the reply was not read: the outcome is unknown
	_ = conn.Close()                                 // back to the pool, or dropped if broken
	if cut {
		d.endConn(id)
	}
	return err
}
