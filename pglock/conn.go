package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Lease is a row- or session-mode hold, reached with dlock's Lease.As: the
// dedicated connection that holds the lock.
type Lease struct {
	PID uint32 // the backend process holding the lock (for pg_terminate_backend)

	d    *pgDriver
	mode Mode
	name string
	mu   sync.Mutex
	conn *pgxpool.Conn
	tx   pgx.Tx // row mode
	done bool
}

// As sets **Lease targets.
func (l *Lease) As(target any) bool {
	if p, ok := target.(**Lease); ok {
		*p = l
		return true
	}
	return false
}

const advisoryKey = "hashtextextended($1, 0)"

func (d *pgDriver) acquireConn(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if ok, err := d.slots.Take(ctx, r.Wait); !ok { // bound the connections held
		return driver.Grant{}, err
	}
	l, ok, err := d.lockConn(ctx, r)
	if err != nil || !ok {
		d.slots.Give()
		return driver.Grant{}, err
	}
	tok, err := d.nextToken(ctx, r.Name, r.Owner, l.PID)
	if err != nil {
		_ = l.release(context.WithoutCancel(ctx))
		return driver.Grant{}, err
	}
	return driver.Grant{Acquired: true, Token: tok, Holds: 1, Handle: l}, nil
}

// lockConn takes a dedicated connection and the lock on it, waiting in the
// database if r.Wait (cancelling ctx cancels the server-side wait).
func (d *pgDriver) lockConn(ctx context.Context, r driver.Request) (*Lease, bool, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, false, pgErr("connect", err)
	}
	l := &Lease{d: d, mode: d.mode, name: r.Name, conn: conn, PID: conn.Conn().PgConn().PID()}
	fail := func(err error) (*Lease, bool, error) {
		l.discard()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, err
	}
	switch d.mode {
	case ModeSession:
		if r.Wait {
			if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock("+advisoryKey+")", r.Name); err != nil {
				return fail(pgErr("pg_advisory_lock", err))
			}
			return l, true, nil
		}
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock("+advisoryKey+")", r.Name).Scan(&ok); err != nil {
			return fail(pgErr("pg_try_advisory_lock", err))
		}
		if !ok {
			conn.Release()
			return nil, false, nil
		}
		return l, true, nil
	default: // row
		if _, err := conn.Exec(ctx, "INSERT INTO dlock_rows (name) VALUES ($1) ON CONFLICT DO NOTHING", r.Name); err != nil {
			return fail(pgErr("row", err))
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return fail(pgErr("begin", err))
		}
		q := "SELECT name FROM dlock_rows WHERE name = $1 FOR UPDATE"
		if !r.Wait {
			q += " NOWAIT"
		}
		var n string
		if err := tx.QueryRow(ctx, q, r.Name).Scan(&n); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
				_ = tx.Rollback(ctx)
				conn.Release()
				return nil, false, nil
			}
			return fail(pgErr("select for update", err))
		}
		l.tx = tx
		return l, true, nil
	}
}

// check confirms the holding connection is alive; any failure on it means
// the server has dropped, or will drop, the lock.
func (l *Lease) check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return fmt.Errorf("pglock: %w: released", dlock.ErrLeaseLost)
	}
	var err error
	if l.tx != nil {
		_, err = l.tx.Exec(ctx, "SELECT 1")
	} else {
		_, err = l.conn.Exec(ctx, "SELECT 1")
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && !l.conn.Conn().IsClosed() {
		return fmt.Errorf("pglock: renew: %w", err) // uncertain: the connection may be fine
	}
	return fmt.Errorf("pglock: %w: the connection holding the lock failed: %v", dlock.ErrLeaseLost, err)
}

// release gives the lock up and the connection back. Once is enough.
func (l *Lease) release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return fmt.Errorf("pglock: release: %w", dlock.ErrLeaseLost)
	}
	l.done = true
	defer l.d.slots.Give()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var err error
	if l.tx != nil {
		err = l.tx.Commit(ctx)
	} else {
		var ok bool
		err = l.conn.QueryRow(ctx, "SELECT pg_advisory_unlock("+advisoryKey+")", l.name).Scan(&ok)
		if err == nil && !ok {
			err = errors.New("not held")
		}
	}
	if err != nil {
		l.discard()
		return fmt.Errorf("pglock: release: %w: %v", dlock.ErrLeaseLost, err)
	}
	l.conn.Release()
	return nil
}

// discard closes the connection instead of pooling it, so nothing it held
// survives.
func (l *Lease) discard() {
	_ = l.conn.Conn().Close(context.Background())
	l.conn.Release()
}

// holderPID returns the backend holding name in row or session mode (0 if
// none).
func (d *pgDriver) holderPID(ctx context.Context, name string) (int32, error) {
	var pid int32
	var err error
	if d.mode == ModeSession {
		err = d.pool.QueryRow(ctx, `SELECT coalesce((SELECT pid FROM pg_locks, (SELECT `+advisoryKey+` AS k) key
WHERE locktype = 'advisory' AND granted AND objsubid = 1
  AND classid = ((key.k >> 32) & 4294967295)::bigint::text::oid AND objid = (key.k & 4294967295)::bigint::text::oid LIMIT 1), 0)`, name).Scan(&pid)
	} else {
		held, e := d.rowHeld(ctx, name)
		if e != nil || !held {
			return 0, e
		}
		err = d.pool.QueryRow(ctx, "SELECT coalesce((SELECT holder_pid FROM dlock_tokens WHERE name = $1), 0)", name).Scan(&pid)
	}
	return pid, pgErr("holder", err)
}

// rowHeld reports whether name's row is locked, without waiting.
func (d *pgDriver) rowHeld(ctx context.Context, name string) (bool, error) {
	var held bool
	err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM dlock_rows WHERE name = $1)
  AND NOT EXISTS (SELECT 1 FROM dlock_rows WHERE name = $1 FOR KEY SHARE SKIP LOCKED)`, name).Scan(&held)
	return held, err
}

func (d *pgDriver) inspectConn(ctx context.Context, name string) (driver.Info, error) {
	info := driver.Info{Name: name}
	pid, err := d.holderPID(ctx, name)
	if err != nil || pid == 0 {
		return info, err
	}
	var owner *string
	var token int64
	err = d.pool.QueryRow(ctx, "SELECT owner, token FROM dlock_tokens WHERE name = $1", name).Scan(&owner, &token)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return info, pgErr("inspect", err)
	}
	info.Held, info.Holds, info.Token = true, 1, uint64(token)
	if owner != nil {
		info.Owner = *owner
	}
	info.Notes = []string{fmt.Sprintf("held by backend pid %d", pid)}
	return info, nil
}
