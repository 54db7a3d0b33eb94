package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// Force release of a mutex, for operators (dlock unlock --force): the
// table mode's row, or the connection that holds the lock in row and
// session modes.

// ForceRelease drops the lock whoever holds it (token 0), or only a
// holder's whose token is token: in table mode in one statement; in row
// and session modes it KILLs the connection that the token's row names,
// if it holds the lock (see forceHolder).
func (d *myDriver) ForceRelease(ctx context.Context, name string, token uint64) error {
	if d.mode == ModeTable {
		_, err := d.db.ExecContext(ctx, "UPDATE dlock_locks SET owner = '', holds = 0, expires_at = '1970-01-02' WHERE name = ? AND (? = 0 OR token = ?)",
			name, token, token)
		return myErr("force release", err)
	}
	if token != 0 {
		return d.forceHolder(ctx, name, token)
	}
	id, err := d.holderID(ctx, name)
	if err != nil || id == 0 {
		return err
	}
	_, err = d.db.ExecContext(ctx, fmt.Sprintf("KILL %d", id))
	return myErr("force release (KILL needs the CONNECTION ADMIN or SUPER privilege)", err)
}

// forceHolder KILLs the connection holding the mutex name in row or
// session mode if its hold has token: the connection its token row names,
// if any (a release clears it first), checked to hold the lock (session
// mode: IS_USED_LOCK; row mode: the row is locked, read first). KILL is a
// statement of its own, so the token row stays locked (FOR UPDATE) from the
// check to the KILL: the holder's release, which clears the row first,
// waits, and its connection cannot take another hold in between (an
// adversary had a KILL meant for token T end the same connection's next
// hold). A connection that ended since is no error.
func (d *myDriver) forceHolder(ctx context.Context, name string, token uint64) error {
	q := "SELECT holder_id FROM dlock_tokens WHERE name = ? AND token = ? AND holder_id = IS_USED_LOCK(?) FOR UPDATE"
	args := []any{name, token, lockName(name)}
	if d.mode == ModeRow {
		id, err := d.holderID(ctx, name)
		if err != nil || id == 0 {
			return err
		}
		q, args = "SELECT holder_id FROM dlock_tokens WHERE name = ? AND token = ? AND holder_id IS NOT NULL FOR UPDATE", args[:2]
	}
	err := func() error {
		tx, err := d.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var id uint64
		err = tx.QueryRowContext(ctx, q, args...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, fmt.Sprintf("KILL %d", id))
		}
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1094 { // unknown thread id: it ended
			err = nil
		}
		if err != nil {
			return err
		}
		return tx.Commit()
	}()
	return myErr("force release (KILL needs the CONNECTION ADMIN or SUPER privilege)", err)
}
