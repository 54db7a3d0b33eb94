// Package mysqllock is the dlock backend for MySQL and MariaDB, through
// github.com/go-sql-driver/mysql: the articles' database locks done properly,
// in three modes.
//
// # URLs
//
//	mysql://user:password@host:3306/db?mode=table|row|session[&max_held=16][&tls=true|skip-verify|custom]
//
// Other query parameters are passed to the driver's DSN. Users with a pool
// already use Open.
//
// # Modes
//
//		mode     how a lock is held                          a dead holder's lock ends    waiting              cost while held
//		table    a row in dlock_locks with an expiry         at its TTL (renewed)         polling + expiry     nothing
//		row      SELECT … FOR UPDATE in an open transaction  when the server sees its     in the database      one connection
//		                                                     connection die
//		session  GET_LOCK(name) on a session                 as for row                   in the database      one connection
//
//	  - table (default): dlock_locks(name PRIMARY KEY, owner, holds, token,
//	    expires_at), created at Open if missing (or by `dlock migrate`).
//	    Acquiring is ONE statement, INSERT … ON DUPLICATE KEY UPDATE, that
//	    takes a free or expired row with the next token, re-enters the
//	    owner's live one, or leaves another's alone; the reply's
//	    LAST_INSERT_ID carries the token (0: refused). Release and a whole
//	    renewal batch are one statement each. Expiry is judged by the
//	    database's NOW(6). Rows are never deleted (a release marks the row
//	    expired), so the row's token column is the name's counter: do not
//	    delete rows by hand, or the name's tokens start again at 1. MySQL has
//	    no notifications, so waiters poll with capped backoff and jitter, and
//	    retry at the holder's expiry.
//	  - row: SELECT … FROM dlock_rows FORCE INDEX (PRIMARY) WHERE name = ? FOR
//	    UPDATE [NOWAIT] in a transaction held open on a dedicated connection.
//	    FORCE INDEX keeps InnoDB from scanning (and locking) other rows.
//	  - session: GET_LOCK(name, -1) on a dedicated connection, so plain SQL
//	    users take the same lock with SELECT GET_LOCK('orders/sku-42', 10).
//	    Names over 64 characters (MySQL's limit) become "dlock:" followed by
//	    the first 58 hex digits of their SHA-256. Not available on Galera
//	    clusters (GET_LOCK is not replicated there): Open refuses it.
//
// row and session modes hold one connection per held lock, at most
// max_held (default 16). When a connection dies the server releases its lock
// at once; the holder learns of it at its next renewal (within TTL/3).
// Cancelling a wait closes its connection, which ends the wait on the server.
//
// Fencing tokens come from the row in table mode and from
// dlock_tokens(name PRIMARY KEY, token) in row and session modes, where the
// token is committed on its own right after the lock is granted, so a
// holder that crashed never gives its token to the next.
//
// The user needs SELECT, INSERT, UPDATE and DELETE on the three tables, and
// CREATE to make them (or run `dlock migrate` once as a user who can).
package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/go-sql-driver/mysql"
)

// Scheme is the URL scheme of the backend.
const Scheme = "mysql"

func init() { dlock.Register(Scheme, driver.OpenerFunc(openURL)) }

// Mode is how locks are held.
type Mode string

// The modes.
const (
	ModeTable   Mode = "table"
	ModeRow     Mode = "row"
	ModeSession Mode = "session"
)

// Options configure Open.
type Options struct {
	Mode Mode // default ModeTable
	// MaxHeld bounds the connections row and session modes hold; default 16.
	MaxHeld int
	// Client are options for the dlock client.
	Client []dlock.ClientOption
	// CloseDB makes Close of the dlock client close db too.
	CloseDB bool
}

// Open returns a dlock client over a database/sql pool of the mysql driver.
// Its tables are created if missing.
func Open(ctx context.Context, db *sql.DB, opts Options) (*dlock.Client, error) {
	d, err := newDriver(ctx, db, opts)
	if err != nil {
		return nil, err
	}
	return dlock.New(d, Scheme, opts.Client...), nil
}

func openURL(ctx context.Context, u *url.URL) (driver.Driver, error) {
	q := u.Query()
	opts := Options{Mode: Mode(q.Get("mode")), CloseDB: true}
	if v := q.Get("max_held"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("mysqllock: %w: max_held %q", dlock.ErrInvalidURL, v)
		}
		opts.MaxHeld = n
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", u.Host
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if len(u.Path) > 1 {
		cfg.DBName = u.Path[1:]
	}
	cfg.ParseTime = true
	for k, v := range q {
		switch k {
		case "mode", "max_held":
		case "tls":
			cfg.TLSConfig = v[0]
		default:
			if cfg.Params == nil {
				cfg.Params = map[string]string{}
			}
			cfg.Params[k] = v[0]
		}
	}
	if err := cfg.Apply(); err != nil {
		return nil, fmt.Errorf("mysqllock: %w: %v", dlock.ErrInvalidURL, err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysqllock: %w: %v", dlock.ErrInvalidURL, err)
	}
	db := sql.OpenDB(conn)
	d, err := newDriver(ctx, db, opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return d, nil
}
