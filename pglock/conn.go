package pglock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Lease is a row- or session-mode hold, reached with dlock's Lease.As: the
// dedicated connection that holds the lock.
type Lease struct {
	PID uint32 // the backend process holding the lock (for pg_terminate_backend)

	d     *pgDriver
	mode  Mode
	name  string
	kind  driver.Kind // Exclusive, or Shared/Write of a read-write lock (session mode)
	owner string
	token uint64
	hold  sqlbase.ConnHold
	conn  *pgxpool.Conn
	tx    pgx.Tx   // row mode
	bound []string // the settings that bound the session, put back by unlock (session mode)
	// ttl is the lease TTL the session's bounds were last set for: a longer
	// Extend raises them (check), since the server ends the session, and so
	// frees the lock, once it has been idle that long.
	ttl time.Duration
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

// rwKey is the advisory lock key of the read-write lock named $1 (session
// mode): another hash of the name, so a Mutex and an RWMutex of one name are
// two locks. Plain SQL users can take it too:
// SELECT pg_advisory_lock_shared(hashtextextended('reports', 1)).
const rwKey = "hashtextextended($1, 1)"

// advisory returns the lock function name and key of kind: pg_advisory_lock
// (exclusive) or pg_advisory_lock_shared, prefix "" or "try_" or "un".
func advisory(kind driver.Kind, op string) (fn, key string) {
	key, suffix := advisoryKey, ""
	if kind != driver.Exclusive {
		key = rwKey
		if kind == driver.Shared {
			suffix = "_shared"
		}
	}
	switch op {
	case "try":
		return "pg_try_advisory_lock" + suffix, key
	case "un":
		return "pg_advisory_unlock" + suffix, key
	}
	return "pg_advisory_lock" + suffix, key
}

// rowLockSQL locks the row named $1 in row mode, bounding the session first.
const rowLockSQL = setBounds + "SELECT r.name FROM bounds, dlock_rows r WHERE r.name = $1 FOR UPDATE OF r"

func (d *pgDriver) acquireConn(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if ok, err := d.slots.Take(ctx, r.Wait); !ok { // bound the connections held
		return driver.Grant{}, d.slots.Full(err)
	}
	l, ok, err := d.lockConn(ctx, r)
	if err != nil || !ok {
		d.slots.Give()
		return driver.Grant{}, err
	}
	// The lease counts from a statement sent on the holding connection after
	// the wait: the server's idle timeout counts from when it finished it.
	var since time.Time
	var tok uint64
	if d.mode == ModeSession && r.Kind != driver.Exclusive { // the read-write lock's counter, and its holder's row for Inspect
		since = time.Now()
		tok, err = d.token(ctx, r.Wait, l.conn, kindTokenSQL, r.Name, r.Owner, int16(r.Kind))
		l.owner, l.token = r.Owner, tok
	} else if d.mode == ModeSession { // no transaction (but a TryLock's): the token's statement is that one
		since = time.Now()
		tok, err = d.token(ctx, r.Wait, l.conn, nextTokenSQL, r.Name, r.Owner, int32(l.PID))
		l.token = tok
	} else { // the token must commit apart from the lock's transaction
		tok, err = d.token(ctx, r.Wait, nil, nextTokenSQL, r.Name, r.Owner, int32(l.PID))
		l.token = tok
		if err == nil {
			confirm := "SELECT 1"
			if !r.Wait { // the lock's transaction bounds no more waits
				confirm = untryBound
			}
			since = time.Now()
			_, err = l.tx.Exec(ctx, confirm)
			err = pgErr("confirm", err)
		}
	}
	if err != nil {
		if rerr := l.release(context.WithoutCancel(ctx)); rerr != nil {
			// ctx cut a statement short, and pgx closed the holding
			// connection: its backend holds the lock until it reads the
			// close, after Acquire has returned. End it first.
			d.endBackend(l.PID)
		}
		return driver.Grant{}, err
	}
	return driver.Grant{Acquired: true, Token: tok, Holds: 1, Since: since, Handle: l}, nil
}

// lockConn takes a dedicated connection and the lock on it, waiting in the
// database if r.Wait (cancelling ctx cancels the server-side wait). The
// connection's session is bounded by r.TTL before the lock is taken.
func (d *pgDriver) lockConn(ctx context.Context, r driver.Request) (*Lease, bool, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, false, pgErr("connect", err)
	}
	l := &Lease{d: d, mode: d.mode, name: r.Name, kind: r.Kind, conn: conn, PID: conn.Conn().PgConn().PID()}
	fail := func(err error) (*Lease, bool, error) {
		if ctx.Err() != nil {
			d.endBackend(l.PID)
		}
		l.discard()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, err
	}
	names, values := d.bounds(r.TTL)
	l.ttl = r.TTL
	if r.Wait { // the wait lasts as long as ctx, whatever lock_timeout the role or database sets
		names, values = append(names, "lock_timeout"), append(values, "0")
	}
	l.bound = names
	switch d.mode {
	case ModeSession:
		if r.Wait {
			fn, key := advisory(r.Kind, "")
			if _, err := conn.Exec(ctx, setBounds+"SELECT "+fn+"("+key+") FROM bounds", r.Name, names, values, false); err != nil {
				return fail(pgErr(fn, err))
			}
			return l, true, nil
		}
		var ok bool
		fn, key := advisory(r.Kind, "try")
		if err := conn.QueryRow(ctx, setBounds+"SELECT "+fn+"("+key+") FROM bounds", r.Name, names, values, false).Scan(&ok); err != nil {
			return fail(pgErr(fn, err))
		}
		if !ok {
			var n int64
			if err := conn.QueryRow(ctx, "SELECT "+resetBounds("$1"), names).Scan(&n); err != nil {
				return fail(pgErr("reset", err))
			}
			conn.Release()
			return nil, false, nil
		}
		return l, true, nil
	default: // row
		// Only if no row shows: an insert that conflicts with a row being
		// deleted or updated waits for that transaction, even a TryLock's.
		const insert = `INSERT INTO dlock_rows (name) SELECT $1
WHERE NOT EXISTS (SELECT 1 FROM dlock_rows WHERE name = $1) ON CONFLICT DO NOTHING`
		var err error
		// Bounded from the BEGIN on (boundedTx): a client cut off before
		// the lock's statement, which bounds it by the lease, would leave
		// its session idle in the transaction for good.
		opts := boundedTx(strconv.FormatInt(sqlbase.IdleMillis(r.TTL), 10))
		if r.Wait {
			_, err = conn.Exec(ctx, insert, r.Name)
		} else {
			_, err = tryExec(ctx, conn.Conn().PgConn(), insert, r.Name)
			opts.BeginQuery += "; " + tryBound // until the confirmation, untryBound
		}
		if lockNotAvailable(err) { // a TryLock beside an outsider's lock on dlock_rows
			conn.Release()
			return nil, false, nil
		}
		if err != nil {
			return fail(pgErr("row", err))
		}
		tx, err := conn.BeginTx(ctx, opts)
		if err != nil {
			return fail(pgErr("begin", err))
		}
		q := rowLockSQL
		if !r.Wait {
			q += " NOWAIT"
		}
		var n string
		if err := tx.QueryRow(ctx, q, r.Name, names, values, true).Scan(&n); err != nil {
			if lockNotAvailable(err) {
				_ = tx.Rollback(ctx) // the settings were local to it
				conn.Release()
				return nil, false, nil
			}
			return fail(pgErr("select for update", err))
		}
		l.tx = tx
		return l, true, nil
	}
}

// endBackend ends the server backend of a lock statement that ctx cut
// short, and waits (up to two seconds) until it is gone. Closing the
// connection is not enough: a backend blocked in a lock wait notices a
// closed client only every client_connection_check_interval, and pgx does
// not cancel the statement, so the backend could take the lock after Lock
// had returned and hold it until then; a backend that did take it holds it
// until it reads the close. A role may end its own backends.
func (d *pgDriver) endBackend(pid uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	const q = "SELECT pg_terminate_backend(pid%s) FROM pg_stat_activity WHERE pid = $1"
	_, err := d.pool.Exec(ctx, fmt.Sprintf(q, ", 2000"), int32(pid))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42883" { // before PostgreSQL 14: no wait
		_, _ = d.pool.Exec(ctx, fmt.Sprintf(q, ""), int32(pid))
	}
}

// check confirms the holding connection is alive; any failure on it means
// the server has dropped, or will drop, the lock.
func (l *Lease) check(ctx context.Context, ttl time.Duration) error {
	return l.hold.Check(ctx, "pglock", ttl, func(ctx context.Context) error {
		q, args := "SELECT 1", []any(nil)
		if ttl > l.ttl {
			// A longer Extend: bounds set for the grant's TTL would end the
			// session, and free the lock, while the lease runs. A shorter
			// one leaves them: other leases of a re-entered hold count on
			// the longer bound.
			names, values := l.d.bounds(ttl)
			q, args = setBoundsSQL, []any{names, values, l.tx != nil}
		}
		var err error
		if l.tx != nil {
			_, err = l.tx.Exec(ctx, q, args...)
		} else {
			_, err = l.conn.Exec(ctx, q, args...)
		}
		if err == nil && ttl > l.ttl {
			l.ttl = ttl
		}
		return err
	}, func() bool { return l.conn.Conn().IsClosed() })
}

// release gives the lock up and the connection back. Once is enough.
func (l *Lease) release(ctx context.Context) error {
	return l.hold.Release(ctx, "pglock", l.unlock, l.conn.Release, l.discard, l.d.slots.Give)
}

// unlock gives up the lock that l's connection holds: commits the row
// mode's transaction, or ends the session mode's advisory lock and puts the
// settings that bounded the session back. A mutex's holder row in
// dlock_tokens forgets the connection as the lock is given up (in the
// transaction, or the statement, that gives it up): a force unlock naming
// this hold's token must not end the connection once it holds another
// lock, or this one again (holderForce).
func (l *Lease) unlock(ctx context.Context) error {
	if l.tx != nil && l.token == 0 { // no token taken (Acquire failed), so none to forget
		return l.tx.Commit(ctx)
	}
	if l.tx != nil {
		if _, err := l.tx.Exec(ctx, forgetHolder, l.name, int64(l.token)); err != nil {
			_ = l.tx.Rollback(ctx) // gives the lock up all the same
			return err
		}
		return l.tx.Commit(ctx)
	}
	var ok bool
	var n int64
	fn, key := advisory(l.kind, "un")
	var err error
	if l.token == 0 { // no token taken (Acquire failed), so no row to clear
		err = l.conn.QueryRow(ctx, "SELECT "+fn+"("+key+"), "+resetBounds("$2"), l.name, l.bound).Scan(&ok, &n)
	} else if l.kind != driver.Exclusive { // its row for Inspect goes first, in the same statement
		err = l.conn.QueryRow(ctx, `WITH h AS (DELETE FROM dlock_holds WHERE name = $1 AND family = 1 AND owner = $3 AND token = $4)
SELECT `+fn+"("+key+"), "+resetBounds("$2"), l.name, l.bound, l.owner, int64(l.token)).Scan(&ok, &n)
	} else {
		err = l.conn.QueryRow(ctx, "WITH t AS ("+forgetHolder+") SELECT "+fn+"("+key+"), "+resetBounds("$3"),
			l.name, int64(l.token), l.bound).Scan(&ok, &n)
	}
	if err == nil && !ok {
		err = errors.New("not held")
	}
	return err
}

// forgetHolder clears the connection of the hold with token $2 of the
// mutex $1 from its token row.
const forgetHolder = "UPDATE dlock_tokens SET holder_pid = NULL WHERE name = $1 AND token = $2"

// discard closes the connection instead of pooling it, so nothing it held
// survives.
func (l *Lease) discard() {
	_ = l.conn.Conn().Close(context.Background())
	l.conn.Release()
}

// holder is who holds a mutex in row or session mode.
type holder struct {
	held bool
	pid  int32  // the holding backend; 0 if held by one dlock cannot tell
	xid  string // row mode: the holding transaction's id
}

// findHolder finds the backend holding name in row or session mode in the
// lock itself, not in the token row, which names the holder only once it
// has written it, and after a crash names a connection that is gone (its
// pid free for PostgreSQL to give to another).
//
// Session mode: the advisory lock's entry in pg_locks, in this database.
//
// Row mode: the transaction whose id is the row's xmax, which a row lock
// sets, and which holds the lock on its own id (pg_locks, "transactionid")
// while it runs. PostgreSQL shows no row lock's mode, and a probe's FOR KEY
// SHARE (Inspect's, this one's) sets xmax too. So the row must be busy: a
// FOR KEY SHARE SKIP LOCKED of it skipped, as it is when the row is locked
// FOR UPDATE, or when a waiter is queued for it (then xmax's transaction is
// what the waiter waits for, maybe a shared lock). And the transaction must
// run before and after that probe and be no probe (probeMark): three
// statements, in that order (in one, PostgreSQL may run the probe first).
// A row locked by a transaction that pg_locks does not show (a released
// savepoint's, or shared row locks beside FOR UPDATE, which make xmax a
// multixact) is held by one dlock cannot tell. One held in a mode that a
// probe does not skip (FOR SHARE, FOR NO KEY UPDATE) with nobody queued,
// which dlock's FOR UPDATE also waits for, shows as free. And a multixact id
// in xmax that equals a running transaction's id names that transaction
// wrongly: what findHolder tells is for Inspect to show, and a force does
// not act on it (forceRow).
func (d *pgDriver) findHolder(ctx context.Context, name string) (holder, error) {
	if d.mode == ModeSession {
		var pid int32
		err := d.pool.QueryRow(ctx, "SELECT coalesce(("+sessionHolderSQL+" LIMIT 1), 0)", name).Scan(&pid)
		return holder{held: pid != 0, pid: pid}, pgErr("holder", err)
	}
	var h holder
	for range 5 {
		var xid *string
		h.pid = 0
		err := d.pool.QueryRow(ctx, `SELECT r.xmax::text, coalesce((SELECT l.pid FROM pg_locks l
WHERE l.locktype = 'transactionid' AND l.transactionid = r.xmax AND l.granted AND l.mode = 'ExclusiveLock'
  AND l.pid <> pg_backend_pid() LIMIT 1), 0)
FROM dlock_rows r WHERE r.name = $1`, name).Scan(&xid, &h.pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return holder{}, nil
		}
		if err != nil {
			return holder{}, pgErr("holder", err)
		}
		if err := d.pool.QueryRow(ctx, rowBusySQL, name).Scan(&h.held); err != nil || !h.held {
			return holder{}, pgErr("holder", err)
		}
		if h.pid == 0 || xid == nil {
			continue // locked since the first read, or by one pg_locks does not show
		}
		h.xid = *xid
		var running bool
		if err := d.pool.QueryRow(ctx, "SELECT EXISTS ("+xactHolderSQL+")", h.xid, h.pid).Scan(&running); err != nil {
			return holder{}, pgErr("holder", err)
		}
		if running {
			return h, nil
		}
	}
	h.pid, h.xid = 0, ""
	return h, nil
}

// sessionHolderSQL selects the pid of the backend holding the session-mode
// mutex named $1: the advisory lock's entry in pg_locks, in this database.
const sessionHolderSQL = `SELECT pid FROM pg_locks, (SELECT ` + advisoryKey + ` AS k) key
WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND database = ` + thisDatabase + `
  AND classid = ((key.k >> 32) & 4294967295)::bigint::text::oid AND objid = (key.k & 4294967295)::bigint::text::oid`

// probeMark is the advisory lock (two int4 keys, "dloc" "prob") that a
// probe of a row-mode lock (rowBusySQL) holds, shared, through its
// transaction, from before it locks the row: a transaction that holds it
// is a probe, whose FOR KEY SHARE sets the row's xmax, and not a holder.
const probeMark = "1684828003, 1886547810"

// rowBusySQL reports whether the row of the row-mode mutex named $1 is
// locked in a mode that a FOR KEY SHARE waits for (FOR UPDATE: a holder;
// or a waiter first in line), without waiting. The join makes the probe
// mark come first: the row is locked once the join has returned it.
const rowBusySQL = `WITH m AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(` + probeMark + `))
SELECT NOT EXISTS (SELECT 1 FROM dlock_rows r, m WHERE r.name = $1 FOR KEY SHARE OF r SKIP LOCKED)`

// xactHolderSQL selects, as pid, the backend $2 if it runs transaction $1
// (an xid, as text) and is no probe (probeMark), in one read of pg_locks.
const xactHolderSQL = `SELECT pid FROM pg_locks WHERE pid = $2 GROUP BY pid
HAVING bool_or(locktype = 'transactionid' AND transactionid = $1::text::xid AND mode = 'ExclusiveLock' AND granted)
  AND NOT bool_or(locktype = 'advisory' AND objsubid = 2 AND (classid, objid) = (` + markOIDs + `))`

// markOIDs are probeMark's keys as pg_locks shows them.
const markOIDs = "1684828003::oid, 1886547810::oid"

// rowHeldUntold is the note on a row-mode lock held by a transaction whose
// backend findHolder cannot tell.
const rowHeldUntold = "the row is locked by a transaction whose connection pg_locks does not show (a released savepoint, or shared row locks beside FOR UPDATE); a force finds it by waiting for the row"

func (d *pgDriver) inspectConn(ctx context.Context, name string) (driver.Info, error) {
	info := driver.Info{Name: name}
	h, err := d.findHolder(ctx, name)
	if err != nil || !h.held {
		return info, err
	}
	info.Held, info.Holds = true, 1
	if h.pid == 0 {
		info.Notes = []string{rowHeldUntold}
		return info, nil
	}
	pid := h.pid
	info.Notes = []string{fmt.Sprintf("held by backend pid %d", pid)}
	// The token row describes the holder only if it names the holding
	// connection: a holder outside dlock (psql's pg_advisory_lock), or
	// one that has not written its token yet, has none of its own, and the
	// last holder's would name it wrongly (and a force naming that token
	// would end nothing).
	var owner *string
	var token int64
	var holder *int32
	err = d.pool.QueryRow(ctx, "SELECT owner, token, holder_pid FROM dlock_tokens WHERE name = $1", name).Scan(&owner, &token, &holder)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return info, pgErr("inspect", err)
	}
	if holder == nil || *holder != pid {
		info.Notes = append(info.Notes, "no token of dlock's: a holder outside dlock, or one that has not written its token yet")
		return info, nil
	}
	info.Token = uint64(token)
	if owner != nil {
		info.Owner = *owner
	}
	return info, nil
}
