package pglock

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// onConn runs f, the table mode's acquire statements, on a pooled
// connection of its own. When ctx ends in f's round trip, pgx closes the
// connection without waiting for the reply, but the server goes on: the
// statement may still take the lock, after the error has returned and
// after dlock's give-up path looked for (and did not find) a hold to undo,
// leaving the name held by a row nobody will release until its TTL. So on
// such a cut-off onConn ends the connection's server process (endBackend) and
// waits for it to go: from then on the store shows whatever the statement did, and
// the give-up path that follows removes it.
func (d *pgDriver) onConn(ctx context.Context, f func(*pgxpool.Conn) error) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	pid := conn.Conn().PgConn().PID()
	err = f(conn)
	cut := err != nil && conn.Conn().IsClosed() // the reply was not read: the outcome is unknown
	conn.Release()
	if cut {
		d.endBackend(pid)
	}
	return err
}
