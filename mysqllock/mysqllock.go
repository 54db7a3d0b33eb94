// Package mysqllock is the dlock backend for MySQL and MariaDB, through
// github.com/go-sql-driver/mysql: lock tables, FOR UPDATE and advisory locks done properly,
// in three modes.
//
// # URLs
//
//	mysql://user:password@host:3306/db?mode=table|row|session[&max_held=16][&tls=true|skip-verify|preferred]
//	mysql://user@host:3306/db?tls=true&ca=/etc/dlock/ca.pem[&cert=client.pem&key=client-key.pem]
//
// Other query parameters are passed to the driver's DSN. Users with a pool
// already use Open.
//
// # TLS
//
// tls=true speaks TLS (1.2 or later) and verifies the server's certificate
// against its host, with the system's CAs or the PEM file ca= names; cert=
// and key= give a client certificate (for accounts created REQUIRE X509).
// Verification is off only when asked for, by the driver's own
// tls=skip-verify (or insecure_skip_verify=true with tls=true);
// tls=preferred also falls back to plaintext. ca, cert, key and
// insecure_skip_verify without tls=true or skip-verify are refused, not
// ignored. A server with require_secure_transport=ON refuses a plaintext
// URL: MySQL says "Connections using insecure transport are prohibited",
// MariaDB says "Access denied", to which dlock adds that TLS may be
// wanted. A server without TLS, asked for it, fails Open at once with
// mysql.ErrNoTLS. Errors never show a key's path.
//
// A MySQL server speaks first, so a URL naming another server's port (TLS
// or not) fails Open at once when that server answers with something else
// (even a few bytes, such as "OK\r\n", that no greeting begins with) or
// hangs up, and within about a second when it waits for the client (Redis,
// HTTP, a TLS port) or stalls within a packet header: Open then asks it on
// a second connection, within about two seconds or until ctx ends. A
// server that says nothing even then, or stalls after a greeting's header,
// cannot be told from a MySQL server slow to greet (reverse DNS can hold
// the greeting for seconds): Open waits for it until ctx ends and says how
// far the greeting came.
//
// # Modes
//
//		mode     how a lock is held                          a dead holder's lock ends    waiting              cost while held
//		table    a row in dlock_locks with an expiry         at its TTL (renewed)         polling + expiry     nothing
//		row      SELECT … FOR UPDATE in an open transaction  when its connection dies,    in the database      one connection
//		                                                     or a TTL (whole seconds,
//		                                                     rounded up) after its last
//		                                                     statement
//		session  GET_LOCK(name) on a session                 as for row                   in the database      one connection
//
//	  - table (default): dlock_locks(name PRIMARY KEY, owner, holds, token,
//	    expires_at, label), created at Open if missing (or by `dlock
//	    migrate`, which is safe to run again); a dlock_locks made before
//	    holder labels gets its label column then. label is the first hold's
//	    dlock.WithLabel ("host:pid" by default), which Inspect reports.
//	    Acquiring is ONE statement, INSERT … ON DUPLICATE KEY UPDATE, that
//	    takes a free or expired row with the next token, re-enters the
//	    owner's live one, or leaves another's alone; the reply's
//	    LAST_INSERT_ID carries the token (0: refused). Release and a whole
//	    renewal batch are one statement each. Expiry is judged by the
//	    database's UTC_TIMESTAMP(6): not NOW(6), which follows each
//	    session's time_zone (a client with time_zone='-05:00' saw every
//	    lock as expired) and jumps with daylight saving. dlock before this
//	    change used NOW(6): on a server whose time zone is not UTC, do not
//	    run old and new clients on the same tables (Open logs a warning on
//	    such a server). Rows are never deleted (a release marks the row
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
//	    the first 58 hex digits of their SHA-256, so a name of that form is
//	    refused (ErrInvalidName): it would be a long name's lock. Not available on Galera
//	    clusters (GET_LOCK is not replicated there): Open refuses it.
//
// row and session modes have no room for a holder label: Inspect reports
// none. They hold one connection per held lock, at most max_held (default
// 16), and at most one less than the *sql.DB's SetMaxOpenConns if it has
// one: the client needs one more for the rest (row mode's tokens, ending a
// cancelled wait's connection). Row mode refuses a pool of one; session
// mode holds one lock on it. When a connection dies the server releases its lock
// at once; the holder learns of it at its next renewal (within TTL/3).
// A wait that ctx ends KILLs its connection and returns once the server has
// dropped it, so an abandoned wait never takes the lock after Lock returned.
// go-sql-driver closes a connection whose statement's ctx ends even as the
// statement succeeds; a grant or renewal counts only with its connection
// still open after its last statement.
// So a renewal's or an Extend's statement runs on for a third of its TTL,
// at most a second, after its ctx ends (sqlbase.Grace), and the call
// returns when it is done; one that has not finished by then is cut short
// and ends the lease (ErrLeaseLost), freeing the lock, rather than leave it
// uncertain as table mode does. An Unlock whose ctx ends while such a
// statement runs cuts it short at once (closing the connection, which
// gives the lock up) rather than wait for it: its lease then ends lost.
// A longer Extend raises the session's idle bounds
// (wait_timeout, net_read_timeout, net_write_timeout) in the same
// statement; a shorter one leaves them.
// A lease counts from the send time of a statement on the holding connection
// after the wait (session mode: the token's; row mode: a SELECT 1 after the
// token), never from before a wait.
// A TryLock waits for no holder (NOWAIT, GET_LOCK(name, 0)), and its other
// statements wait at most a second (innodb_lock_wait_timeout and
// lock_wait_timeout, put back before the connection returns to the pool)
// for a session outside dlock that holds dlock's tables or a row of them:
// an open transaction that inserted the same new name or locked the name's
// token row, a LOCK TABLES. It is then refused (ErrNotAcquired) if the
// lock's row was in question, or fails with an error that says so if its
// token was, and holds nothing either way. Lock waits for such a session as
// it waits for a holder. (Table mode's statements wait for them up to
// innodb_lock_wait_timeout, or until ctx ends.)
//
// The three modes are three different locks: table mode's rows, row
// mode's FOR UPDATE and session mode's GET_LOCK do not exclude one
// another, so a client of one mode and a client of another both get the
// same name at once, and table mode's tokens and the others' count apart,
// so the two holders may carry the same token (an adversary pass, every
// pair). Every client of a name must use one mode. To switch modes, stop
// every client of the old mode before the first client of the new one
// starts: a rolling switch double-grants for as long as it lasts. dlock
// does not detect a mix.
//
// # A holder cut off (row and session modes)
//
// The lock lasts as long as the holding session. So that a holder cut off
// without a close (dropped packets, a frozen host) does not keep it for as
// long as the server believes the connection alive (about two hours with
// default keepalives), the holding session's wait_timeout,
// net_read_timeout and net_write_timeout are set, before the lock is taken,
// to the TTL in whole seconds rounded up (at least 1 s), and put back before
// the connection returns to the pool. The server closes a session that sent
// no statement for wait_timeout, in a transaction or not, which frees the
// lock. The holder sends one every TTL/3 (its renewal) and its lease counts
// from that statement's send time, so the server never frees the lock
// before the holder's lease has ended; another client gets it within about
// the rounded-up TTL + TTL/3 of the cut (3.0 s with a 3 s TTL in the tests,
// through a proxy that drops everything). A holder paused longer than its
// TTL loses its session the same way (its lease had ended).
//
// What remains: the bound is in whole seconds (a 500 ms TTL is held up to
// 1 s after the holder's last statement). The server's TCP keepalives are
// global settings (MariaDB's tcp_keepalive_time, …), not per session, and
// dlock leaves them alone. A waiter cut off while waiting is not noticed on
// a network that drops packets (at best the server notices a closed
// connection; an InnoDB row lock wait ends at innodb_lock_wait_timeout and
// dlock waits again); if it is granted, wait_timeout frees the lock a rounded-up TTL later, so each
// such waiter can delay the next holder by up to that.
//
// # Failed releases (table mode)
//
// A release that fails with an uncertain error (the server down, the
// connection lost) may leave the row counting the hold. The client
// remembers it and settles it before the owner's next acquire of the name:
// it drops the holds whose release failed, but never below the holds the
// client still has; if that fails too, the acquire fails and Lock retries.
// So an owner never re-enters, with its old token, a hold it gave up (which
// would refresh the row at every re-entry and keep every other owner out).
// A release whose ctx ended may still reach the server after it was
// settled (held in the network, or run before the server saw the
// connection drop). Every release carries the holds the client believed it
// kept as a floor, so such a late release never takes the row below what
// the owner holds, and the owner's releases run one at a time so that the
// floor is exact when sent; a floor never raises the row.
// Each release also carries an id of its own, and the row keeps the ids of
// the last 32 releases applied to it: a settle sends the failed releases'
// ids again, and the row drops the holds of only those it has not applied
// (and lists each id once). So a release whose reply was lost after it was
// applied is not applied twice, and a late release that lands after its
// settle does nothing. This is what keeps, with one owner id shared by
// several processes, the other processes' holds, which one client's floor
// does not count.
// What remains: a client that exits, or never locks the name again, leaves
// the row to expire at its TTL; and a release settled only after 32 other
// releases of the row (by other processes of a shared owner) has lost its
// id from the row, so if it had been applied it is applied again: then
// only the floor stands, which keeps this client's holds and not the other
// processes'.
//
// Fencing tokens come from the row in table mode and from
// dlock_tokens(name PRIMARY KEY, token) in row and session modes, where the
// token is committed on its own right after the lock is granted, so a
// holder that crashed never gives its token to the next.
//
// # Read-write locks and semaphores (table mode)
//
// Client.RWMutex and Client.Semaphore work in table mode, as in pglock's
// (see its package doc): a state row in dlock_kinds (token counter, arrival
// counter, the semaphore's permit count) that each acquire transaction
// locks FOR UPDATE, the holds in dlock_holds and the refused readers' and
// writers' places in dlock_waits (records living 2 s at most unless renewed
// by the next attempt), so a waiting writer keeps later readers out and
// readers that waited before it go first. There are no notifications:
// waiters poll, at most every second. Row and session modes report
// ErrUnsupported with the reason (GET_LOCK has no shared mode; FOR SHARE
// lets new readers past a waiting FOR UPDATE; neither waits for one of N).
// A failed release of a read or write hold or a permit is not settled as a
// Mutex's is: the hold stays until its TTL (each of its statements stands
// alone, so that a pause cannot fail it halfway). While any of table
// mode's transactions runs (an acquire of a read, write or permit, a
// renewal, a Mutex's renewal too), its session's wait_timeout is the TTL (the
// batch's shortest), at most 5 s (sqlbase.MaxTxIdle; rounded up to whole
// seconds; put back after it): a client paused or cut off between two of
// its statements, which holds the rows it locked and so keeps every other
// client of those locks waiting, has its session ended by the server once
// idle that long, not after the default eight hours, nor after the
// requester's own TTL. The bound is on each idle gap, not on the whole
// transaction (an acquire is about 25 round trips: go-sql-driver sends
// each statement with arguments as a prepare and an execute): a client
// that is slow rather than stopped, with a round trip near the bound, can
// keep the others waiting for several bounds, and gets no grant itself
// (its session is ended, or each grant comes too late to be safe). Keep
// the TTL well over 25 round trips long: a writer with a TTL of 1 s on a
// link of 40 ms a round trip had every grant come too late, and readers
// that came after it went first (a grant too late to keep is released,
// and its place in line with it).
//
// # TTL limits
//
// TTLs are whole microseconds, from 5.13 ms (a grant must arrive with
// TTL/100 + 2ms + min(TTL/10, 1s) left) up to ten years; a TTL outside is
// refused with ErrInvalidTTL when the lock is made. Expiry is judged by
// the database's UTC_TIMESTAMP(6) in table mode; in row and session mode the
// server's timeouts that free a cut-off holder's lock are whole seconds,
// rounded up ("A holder cut off").
//
// # Per-name state that stays
//
// A name's token counter stays after its last release: table mode's
// dlock_locks row (its token column is the counter; rows are never
// deleted), dlock_tokens rows in row and session modes, and dlock_kinds
// rows (one per family used). Deleting one would let tokens start again at
// 1. That is one row of about 40 bytes plus the name (twice, with the
// primary key) per name ever locked. Lock a bounded set of names, or
// retire counters as docs/design.md ("Per-name state that stays")
// describes.
//
// # Logs
//
// go-sql-driver's own log lines ("unexpected EOF" after a server restart,
// bad idle connections) go to the dlock client's logger as warnings for a
// client opened from a URL; with Open, set mysql.Config.Logger yourself.
//
// # Least privilege
//
// Let an owner account make the tables, once (`dlock migrate --backend
// mysql://dlock_owner:…@host/dlock`, or Client.Migrate); workers then need
// only to read and write rows (and delete the read-write locks' and
// semaphores' holds and waits; a mutex's rows are never deleted), and cannot alter
// the schema: Open makes nothing when the tables are there. As root:
//
//	CREATE DATABASE dlock;
//	CREATE USER 'dlock_owner'@'%' IDENTIFIED BY 'OWNER_PASSWORD';
//	GRANT CREATE, ALTER, SELECT, INSERT, UPDATE ON dlock.* TO 'dlock_owner'@'%';
//	-- here: dlock migrate --backend mysql://dlock_owner:OWNER_PASSWORD@host:3306/dlock
//	CREATE USER 'dlock_worker'@'%' IDENTIFIED BY 'PASSWORD';
//	GRANT SELECT, INSERT, UPDATE ON dlock.dlock_locks TO 'dlock_worker'@'%';
//	GRANT SELECT, INSERT, UPDATE ON dlock.dlock_tokens TO 'dlock_worker'@'%';
//	GRANT SELECT, INSERT, UPDATE ON dlock.dlock_rows TO 'dlock_worker'@'%';
//	GRANT SELECT, INSERT, UPDATE, DELETE ON dlock.dlock_kinds TO 'dlock_worker'@'%';
//	GRANT SELECT, INSERT, UPDATE, DELETE ON dlock.dlock_holds TO 'dlock_worker'@'%';
//	GRANT SELECT, INSERT, UPDATE, DELETE ON dlock.dlock_waits TO 'dlock_worker'@'%';
//
// The conformance suite's LeastPrivilege section runs exactly these statements on MariaDB,
// then the conformance suite in every mode as dlock_worker. GET_LOCK
// (session mode) needs no grant. A missing privilege gives an error naming
// it (the server's "… command denied to user … for table …", with what the
// user needs) that wraps dlock.ErrInvalidConfig, so Lock fails at once.
// Adding the label column to a dlock_locks made before holder labels needs
// ALTER (dlock migrate as the owner).
//
// Tenants: give each a database of its own, with its own owner and worker,
// as above. A worker of one can neither read, take, release nor overwrite
// another's locks (the server refuses the other database), in table and
// row modes. GET_LOCK names (session mode) are server-wide: workers of
// tenants sharing a server can hold (and so block) each other's names,
// though never release them; give such tenants servers of their own, or
// table mode. Within one tenant the server cannot tell holders apart: any
// worker may update any row, so in table mode dlock unlock --force needs
// only the worker grant. In row and session modes force unlock ends the
// holder's connection with KILL, which a user may do to its own
// connections only: ending another user's needs CONNECTION ADMIN (or SUPER),
// and the error names it.
package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/go-sql-driver/mysql"
)

// Scheme is the URL scheme of the backend.
const Scheme = "mysql"

func init() { dlock.Register(Scheme, driver.OpenerFunc(openURL)) }

// Mode is how locks are held.
type Mode string

// The modes.
const (
	ModeTable   Mode = sqlbase.ModeTable
	ModeRow     Mode = sqlbase.ModeRow
	ModeSession Mode = sqlbase.ModeSession
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
	// Logger receives warnings, such as a server whose time zone is not
	// UTC. Default slog.Default(); URLs log through the dlock client's
	// logger.
	Logger *slog.Logger
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
	mode, maxHeld, err := sqlbase.URLOptions("mysqllock", q)
	if err != nil {
		return nil, err
	}
	opts := Options{Mode: Mode(mode), MaxHeld: maxHeld, CloseDB: true, Logger: driver.Logger(ctx)}
	cfg, err := dsnParams(u.RawQuery, q)
	if err != nil {
		return nil, err
	}
	cfg.Net, cfg.Addr = "tcp", u.Host
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if len(u.Path) > 1 {
		cfg.DBName = u.Path[1:]
	}
	cfg.ParseTime = true
	cfg.Logger = mysqlLogger{driver.Logger(ctx).With("backend", Scheme)}
	g := &greeter{} // another server's port: say so at Open, not at the deadline
	cfg.DialFunc = g.dial
	cfg.TLSConfig = q.Get("tls")
	if err := urlTLS(ctx, cfg, q); err != nil {
		return nil, err
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
		if cfg.TLS == nil {
			err = hintTLS(err)
		}
		return nil, err
	}
	g.opened.Store(true)
	return d, nil
}

// dsnParams returns a driver configuration made from the URL's parameters
// other than dlock's own (mode, max_held) and TLS's (see urlTLS), as the
// driver's DSN takes them: timeout=, readTimeout=, charset=, … set its
// fields, and any other is a system variable set on each connection. They
// go to the driver as written in the URL (rawQuery): the driver unescapes
// some values itself and takes others as they are (charset=a,b). A
// parameter given twice, a timeout below zero, or one the driver refuses
// (even by panicking, as it does on strict=) is ErrInvalidURL.
func dsnParams(rawQuery string, q url.Values) (cfg *mysql.Config, err error) {
	for k, v := range q {
		if len(v) > 1 {
			return nil, fmt.Errorf("mysqllock: %w: %s is given %d times", dlock.ErrInvalidURL, k, len(v))
		}
	}
	var rest []string
	for _, kv := range strings.Split(rawQuery, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if k, err := url.QueryUnescape(k); err == nil {
			switch k {
			case "", "mode", "max_held", "tls", "ca", "cert", "key", "insecure_skip_verify":
				continue
			case "autocommit":
				// Table mode's statements must commit each by itself: with
				// autocommit off a grant's row lock stays taken.
				return nil, fmt.Errorf("mysqllock: %w: autocommit: dlock needs the server's default (on)", dlock.ErrInvalidURL)
			}
		}
		// The driver cuts its DSN at the last '/': a '/' in a value
		// (loc=Europe/Paris) goes escaped, which the driver decodes where
		// a '/' can occur (loc, system variables).
		rest = append(rest, strings.ReplaceAll(kv, "/", "%2F"))
	}
	if len(rest) == 0 {
		return mysql.NewConfig(), nil
	}
	defer func() {
		if r := recover(); r != nil { // the driver panics on some values
			cfg, err = nil, fmt.Errorf("mysqllock: %w: %v", dlock.ErrInvalidURL, r)
		}
	}()
	cfg, err = mysql.ParseDSN("/?" + strings.Join(rest, "&"))
	if err != nil {
		return nil, fmt.Errorf("mysqllock: %w: %v", dlock.ErrInvalidURL, err)
	}
	for name, d := range map[string]time.Duration{"timeout": cfg.Timeout, "readTimeout": cfg.ReadTimeout, "writeTimeout": cfg.WriteTimeout} {
		if d < 0 {
			return nil, fmt.Errorf("mysqllock: %w: %s=%v: want 0 (none) or more", dlock.ErrInvalidURL, name, d)
		}
	}
	if cfg.MaxAllowedPacket < 0 {
		return nil, fmt.Errorf("mysqllock: %w: maxAllowedPacket=%d: want 0 (the server's) or more", dlock.ErrInvalidURL, cfg.MaxAllowedPacket)
	}
	return cfg, nil
}

// mysqlLogger sends go-sql-driver's own log lines ("unexpected EOF" after
// a server restart, bad idle connections) to the dlock client's logger as
// warnings, as redislock does with go-redis's, instead of to stderr.
type mysqlLogger struct{ l *slog.Logger }

// Print implements mysql.Logger.
func (m mysqlLogger) Print(v ...any) {
	m.l.Warn("mysqllock: go-sql-driver: " + strings.TrimSpace(fmt.Sprint(v...)))
}
