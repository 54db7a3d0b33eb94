package pglock

import (
	"context"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/listing"
	"github.com/dlock/dlock/internal/sqlbase"
)

// List implements driver.Lister: table mode reads the live rows of
// dlock_locks, row and session modes the names in dlock_tokens (every name
// ever locked); the read-write locks and semaphores are the names with
// rows in dlock_holds, where the mode has them; and each is inspected. In
// row and session modes it also counts a Mutex's waiters: the sessions
// blocked by the holder's.
func (d *pgDriver) List(ctx context.Context, prefix string) ([]driver.Info, error) {
	q := `SELECT name FROM dlock_tokens WHERE name LIKE $1`
	if d.mode == ModeTable {
		q = `SELECT name FROM dlock_locks WHERE name LIKE $1 AND expires_at > clock_timestamp()`
	}
	rows, err := d.pool.Query(ctx, q, sqlbase.LikePrefix(prefix))
	if err != nil {
		return nil, pgErr("list", err)
	}
	refs, err := sqlbase.Refs(rows, rows.Close, false)
	if err != nil {
		return nil, pgErr("list", err)
	}
	if d.Caps().Supports(driver.Shared) || d.Caps().Supports(driver.Permit) {
		rows, err := d.pool.Query(ctx, sqlbase.KindsQuery("$1"), sqlbase.LikePrefix(prefix))
		if err != nil {
			return nil, pgErr("list", err)
		}
		kinds, err := sqlbase.Refs(rows, rows.Close, true)
		if err != nil {
			return nil, pgErr("list", err)
		}
		// Table-mode clients of the same database keep semaphores there
		// too, which session mode cannot read: List failed on them with
		// ErrUnsupported. They are another mode's locks: left out.
		for _, r := range kinds {
			if d.Caps().Supports(r.Family) {
				refs = append(refs, r)
			}
		}
	}
	in := listing.For(d)
	in.Inspect = d.inspectWaiters
	out, err := listing.Inspect(ctx, refs, in)
	if err != nil {
		return nil, pgErr("list", err)
	}
	if d.mode == ModeTable {
		for i := range out {
			if out[i].Kind == driver.Exclusive {
				out[i].Notes = append(out[i].Notes, driver.WaitersUncounted(
					"table-mode waiters poll the table and leave no record in it (dlockotel's dlock.lock.waiting counts each process's own)"))
			}
		}
	}
	return out, nil
}

// inspectWaiters is Inspect that, in row and session modes, also counts a
// held lock's waiters. Not in Inspect: a waiter that gave up shows as
// blocked for a moment after its Lock returned, until the server has
// processed the cancel, and Inspect must not count it then.
func (d *pgDriver) inspectWaiters(ctx context.Context, name string) (driver.Info, error) {
	info, err := d.Inspect(ctx, name)
	if err != nil || !info.Held || d.mode == ModeTable {
		return info, err
	}
	h, err := d.findHolder(ctx, name)
	if err != nil {
		return driver.Info{}, err
	}
	if h.pid != 0 {
		if info.Waiters, err = d.blockedBy(ctx, h.pid); err != nil {
			return driver.Info{}, err
		}
	}
	return info, nil
}

// blockedBy counts the sessions waiting for a lock that the session pid
// holds. In row and session modes the holding session is dedicated to one
// lock, so these are the lock's waiters, wherever they come from.
func (d *pgDriver) blockedBy(ctx context.Context, pid int32) (int, error) {
	var n int
	err := d.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", pid).Scan(&n)
	return n, pgErr("inspect waiters", err)
}
