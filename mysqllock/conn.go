package mysqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/go-sql-driver/mysql"
)

// Lease is a row- or session-mode hold, reached with dlock's Lease.As.
type Lease struct {
	ConnID uint64 // the server connection holding the lock (for KILL)

	d     *myDriver
	name  string
	token uint64
	hold  sqlbase.ConnHold
	conn  *sql.Conn
	tx    *sql.Tx // row mode
	// the session's timeouts before the lock bounded them: wait_timeout,
	// net_read_timeout, net_write_timeout, innodb_lock_wait_timeout,
	// lock_wait_timeout
	saved [5]int64
	// ttl is the lease TTL the session's idle bounds were last set for: a
	// longer Extend raises them (check), since the server closes the
	// session, and so frees the lock, once it has been idle that long.
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

// lockName is the GET_LOCK name session mode uses for name: the name itself
// up to 64 characters, else "dlock:" and the first 58 hex digits of its
// SHA-256.
func lockName(name string) string {
	if len([]rune(name)) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return hashedPrefix + hex.EncodeToString(sum[:])[:58]
}

const hashedPrefix = "dlock:"

// hashedForm reports whether name is itself of the form lockName gives
// long names ("dlock:" and 58 hex digits), which would make it one
// GET_LOCK with the long name it is the hash of.
func hashedForm(name string) bool {
	h, ok := strings.CutPrefix(name, hashedPrefix)
	if !ok || len(h) != 58 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// CheckName implements driver.NameChecker: in session mode a name of the
// form lockName gives long names is refused, so two distinct names are
// never one GET_LOCK.
func (d *myDriver) CheckName(name string) error {
	if d.mode == ModeSession && hashedForm(name) {
		return fmt.Errorf("mysqllock: %w: %q: session mode keeps names of this form (\"dlock:\" and 58 hex digits) for names over 64 characters", driver.ErrInvalidName, name)
	}
	return nil
}

func (d *myDriver) acquireConn(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if ok, err := d.slots.Take(ctx, r.Wait); !ok { // bound the connections held
		return driver.Grant{}, d.slots.Full(err)
	}
	l, ok, err := d.lockConn(ctx, r)
	if err != nil || !ok {
		d.slots.Give()
		return driver.Grant{}, err
	}
	// The lease counts from a statement sent on the holding connection after
	// the wait: the server's wait_timeout counts from when it finished it.
	//
	// These statements are not cut by ctx: the lock is held now. The
	// driver closes a connection whose statement's ctx ends as it
	// completes, even one that reports success, which would hand out a
	// lease on a lock the server has just freed.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var since time.Time
	var tok uint64
	if l.tx == nil { // session mode: no transaction, the token's statement is that one
		since = time.Now()
		tok, err = nextToken(sctx, l.conn, r, l.ConnID)
		l.token = tok
	} else { // the token must commit apart from the lock's transaction
		tok, err = d.poolToken(sctx, r, l.ConnID)
		l.token = tok
		if err == nil {
			since = time.Now()
			if _, err = l.tx.ExecContext(sctx, "SELECT 1"); err != nil {
				err = fmt.Errorf("confirm: %w", err)
			}
		}
	}
	if err == nil && connClosed(l.conn) {
		// ctx ended as a statement finished, and go-sql-driver closed the
		// connection after the statement had succeeded: the server frees
		// the lock with it.
		err = fmt.Errorf("the holding connection was closed as ctx ended: %w", ctx.Err())
	}
	if err != nil {
		if rerr := l.release(context.WithoutCancel(ctx)); rerr != nil {
			d.endConn(l.ConnID) // the closed connection's thread frees the lock as it ends
		}
		if lockTimedOut(err) {
			err = fmt.Errorf("another session has held dlock's tables, or the lock's row in them, for a second: %w", err)
		}
		return driver.Grant{}, myErr("token", err)
	}
	return driver.Grant{Acquired: true, Token: tok, Holds: 1, Since: since, Handle: l}, nil
}

// nextToken takes r.Name's next token through e, outside any transaction,
// recording the holder (for Inspect and ForceRelease).
func nextToken(ctx context.Context, e interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, r driver.Request, connID uint64) (uint64, error) {
	res, err := e.ExecContext(ctx, `INSERT INTO dlock_tokens (name, token, owner, holder_id) VALUES (?, LAST_INSERT_ID(1), ?, ?)
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1), owner = VALUES(owner), holder_id = VALUES(holder_id)`, r.Name, r.Owner, connID)
	if err != nil {
		return 0, err
	}
	// Read the result at once: it locks the pooled connection it came from,
	// which another Lock may take next and block on the lock this one holds.
	id, err := res.LastInsertId()
	return uint64(id), err
}

func (d *myDriver) lockConn(ctx context.Context, r driver.Request) (*Lease, bool, error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, false, myErr("connect", err)
	}
	l := &Lease{d: d, name: r.Name, conn: conn}
	var tx *sql.Tx
	fail := func(err error) (*Lease, bool, error) {
		if ctx.Err() != nil && l.ConnID != 0 {
			d.endConn(l.ConnID)
		}
		if tx != nil { // an open transaction holds the connection: end it first
			_ = tx.Rollback()
		}
		l.discard()
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, err
	}
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), "+sessionTimeouts).
		Scan(&l.ConnID, &l.saved[0], &l.saved[1], &l.saved[2], &l.saved[3], &l.saved[4]); err != nil {
		return fail(myErr("connect", err))
	}
	// Bound the session by the lease (see sqlbase): the server closes it,
	// and so frees the lock, once no statement has come for the TTL in
	// whole seconds, rounded up. A TryLock's lock waits are bounded too
	// (tryWait).
	idle := sqlbase.IdleSeconds(r.TTL)
	l.ttl = r.TTL
	waits := [2]int64{l.saved[3], l.saved[4]}
	if !r.Wait {
		waits = [2]int64{tryWait, tryWait}
	}
	if _, err := conn.ExecContext(ctx, setTimeouts, idle, idle, idle, waits[0], waits[1]); err != nil {
		return fail(myErr("set wait_timeout", err))
	}
	// MySQL notices a closed client only when it next talks to it, so a
	// cancelled wait would go on waiting on the server (and could then take
	// the lock). When ctx ends, KILL the waiting connection from another.
	stop := context.AfterFunc(ctx, func() {
		kctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = d.db.ExecContext(kctx, fmt.Sprintf("KILL %d", l.ConnID))
	})
	defer stop()
	granted := func() (*Lease, bool, error) {
		if !stop() { // the kill is under way: whatever was granted is going
			return fail(ctx.Err())
		}
		return l, true, nil
	}
	if d.mode == ModeSession {
		timeout := 0
		if r.Wait {
			timeout = 365 * 24 * 3600 // a year (MariaDB reads -1 as 0); ctx ends the wait by closing the connection
		}
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", lockName(r.Name), timeout).Scan(&got); err != nil {
			return fail(myErr("GET_LOCK", err))
		}
		if got.Int64 != 1 {
			l.restore()
			return nil, false, nil
		}
		return granted()
	}
	// Create the row if missing. A consistent read first: INSERT IGNORE on a
	// row another transaction has locked would wait for that lock.
	var exists int
	err = conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM dlock_rows WHERE name = ?", r.Name).Scan(&exists)
	if err == nil && exists == 0 {
		_, err = conn.ExecContext(ctx, "INSERT IGNORE INTO dlock_rows (name) VALUES (?)", r.Name)
	}
	if lockTimedOut(err) { // a TryLock beside an outsider's lock on dlock_rows
		l.restore()
		return nil, false, nil
	}
	if err != nil {
		return fail(myErr("row", err))
	}
	// database/sql rolls a transaction back when the context it began with
	// ends: the lock's transaction must outlive this call. The wait below
	// still ends with ctx.
	tx, err = conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return fail(myErr("begin", err))
	}
	q := "SELECT name FROM dlock_rows FORCE INDEX (PRIMARY) WHERE name = ? FOR UPDATE"
	if !r.Wait {
		q += " NOWAIT"
	}
	var n string
	if err := tx.QueryRowContext(ctx, q, r.Name).Scan(&n); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 3572 || lockTimedOut(err) { // NOWAIT: lock not available
			_ = tx.Rollback()
			l.restore()
			return nil, false, nil
		}
		if tx == nil {
			return fail(myErr("begin", err))
		}
		return fail(myErr("select for update", err))
	}
	l.tx = tx
	return granted()
}

// endConn ends the server connection id of a lock statement that ctx cut
// short, and waits (up to two seconds) until the server has dropped it.
// Neither closing the connection nor the KILL sent when ctx ended is
// enough: the statement may have taken the lock just before, and the server
// frees it only once the connection's thread has ended, after KILL
// returns. A thread leaves the process list after its locks are freed; a
// user sees its own threads there, and may KILL them.
func (d *myDriver) endConn(id uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, _ = d.db.ExecContext(ctx, fmt.Sprintf("KILL %d", id))
	for {
		var n int
		err := d.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n)
		if err != nil || n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// check confirms the holding connection is alive.
func (l *Lease) check(ctx context.Context, ttl time.Duration) error {
	return l.hold.Check(ctx, "mysqllock", ttl, func(ctx context.Context) error {
		if ttl > l.ttl {
			// A longer Extend: idle bounds set for the grant's TTL would
			// close the session, and free the lock, while the lease runs.
			// A shorter one leaves them: other leases of a re-entered hold
			// count on the longer bound.
			idle := sqlbase.IdleSeconds(ttl)
			var err error
			if l.tx != nil {
				_, err = l.tx.ExecContext(ctx, setIdle, idle, idle, idle)
			} else {
				_, err = l.conn.ExecContext(ctx, setIdle, idle, idle, idle)
			}
			if err == nil {
				l.ttl = ttl
			}
			return err
		}
		if l.tx != nil {
			_, err := l.tx.ExecContext(ctx, "SELECT 1")
			return err
		}
		return l.conn.PingContext(ctx)
	}, func() bool { return connClosed(l.conn) })
}

// connClosed reports whether c's connection is closed. go-sql-driver closes
// a connection whose statement's ctx ends, even as the statement finishes
// successfully: by the time the statement returns it has decided, and the
// server frees the session's locks and transaction with the connection. So
// a statement's success on a dedicated connection proves the lock only
// with the connection still open after it.
func connClosed(c *sql.Conn) bool {
	closed := false
	err := c.Raw(func(dc any) error {
		if v, ok := dc.(sqldriver.Validator); ok {
			closed = !v.IsValid()
		}
		return nil
	})
	return closed || err != nil
}

// release gives the lock up and the connection back. Once is enough.
func (l *Lease) release(ctx context.Context) error {
	unfit := false // released, but the connection is not fit for the pool
	unlock := func(ctx context.Context) error {
		// The hold's token row forgets the connection first, while the lock
		// is still held: a force unlock naming this hold's token must not
		// KILL the connection once it holds another lock, or this one
		// again (forceHolder).
		var err error
		switch {
		case l.token == 0: // no token taken (Acquire failed), so none to forget
		case l.tx != nil:
			_, err = l.tx.ExecContext(ctx, forgetHolder, l.name, l.token)
		default:
			_, err = l.conn.ExecContext(ctx, forgetHolder, l.name, l.token)
		}
		if err != nil {
			if l.tx != nil {
				_ = l.tx.Rollback()
			}
			return err
		}
		if l.tx != nil {
			// COMMIT as a statement, bounded by ctx (Tx.Commit is not: it would
			// wait on a dead connection until TCP gives up); then Rollback ends
			// database/sql's transaction, with nothing left to roll back.
			if _, err = l.tx.ExecContext(ctx, "COMMIT"); err == nil && l.tx.Rollback() != nil {
				unfit = true
				return nil
			}
		} else {
			var ok sql.NullInt64
			err = l.conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", lockName(l.name)).Scan(&ok)
			if err == nil && ok.Int64 != 1 {
				err = errors.New("not held by this session")
			}
		}
		if err != nil && l.tx != nil {
			_ = l.tx.Rollback()
		}
		return err
	}
	keep := func() {
		if unfit {
			l.discard()
		} else {
			l.restore()
		}
	}
	return l.hold.Release(ctx, "mysqllock", unlock, keep, l.discard, l.d.slots.Give)
}

// forgetHolder clears the connection of the hold with token ? of the mutex
// ? from its token row.
const forgetHolder = "UPDATE dlock_tokens SET holder_id = NULL WHERE name = ? AND token = ?"

// restore puts back the session's timeouts and returns the connection to
// the pool, or discards it if that fails.
func (l *Lease) restore() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.conn.ExecContext(ctx, setTimeouts, l.saved[0], l.saved[1], l.saved[2], l.saved[3], l.saved[4]); err != nil {
		l.discard()
		return
	}
	_ = l.conn.Close() // back to the pool: it holds nothing now
}

// discard closes the dedicated connection instead of pooling it: nothing it
// held survives it.
func (l *Lease) discard() {
	_ = l.conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	_ = l.conn.Close()
}

// holderID returns the connection holding name (0 if none).
func (d *myDriver) holderID(ctx context.Context, name string) (uint64, error) {
	var id sql.NullInt64
	var err error
	if d.mode == ModeSession {
		err = d.db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName(name)).Scan(&id)
	} else {
		// Held if the row exists but a shared read that skips locked rows
		// does not see it (INNODB_TRX would be up to 0.1s stale).
		var rows, free int
		err = d.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM dlock_rows WHERE name = ?", name).Scan(&rows)
		if err == nil && rows > 0 {
			err = d.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM dlock_rows WHERE name = ? LOCK IN SHARE MODE SKIP LOCKED", name).Scan(&free)
		}
		if err != nil || rows == 0 || free > 0 {
			return 0, myErr("holder", err)
		}
		err = d.db.QueryRowContext(ctx, "SELECT holder_id FROM dlock_tokens WHERE name = ?", name).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
	}
	return uint64(id.Int64), myErr("holder", err)
}

func (d *myDriver) inspectConn(ctx context.Context, name string) (driver.Info, error) {
	info := driver.Info{Name: name}
	id, err := d.holderID(ctx, name)
	if err != nil || id == 0 {
		return info, err
	}
	info.Held, info.Holds = true, 1
	info.Notes = []string{fmt.Sprintf("held by connection %d", id)}
	// The token row describes the holder only if it names the holding
	// connection (see pglock's inspectConn): not a plain GET_LOCK session,
	// nor a holder that has not written its token yet.
	var owner sql.NullString
	var token uint64
	var holder sql.NullInt64
	err = d.db.QueryRowContext(ctx, "SELECT owner, token, holder_id FROM dlock_tokens WHERE name = ?", name).Scan(&owner, &token, &holder)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return info, myErr("inspect", err)
	}
	if !holder.Valid || uint64(holder.Int64) != id {
		info.Notes = append(info.Notes, "no token of dlock's: a holder outside dlock, or one that has not written its token yet")
		return info, nil
	}
	info.Owner, info.Token = owner.String, token
	return info, nil
}
