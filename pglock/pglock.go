// Package pglock is the dlock backend for PostgreSQL, through
// github.com/jackc/pgx/v5: lock tables, FOR UPDATE and advisory locks done properly, in
// three modes.
//
// # URLs
//
//	postgres://user:password@host:5432/db?mode=table|row|session[&max_held=16][&pgx options, sslmode=…]
//
// (postgresql:// too). Users with a pool already use Open.
//
// # TLS
//
//	postgres://user@host:5432/db?sslmode=verify-full&sslrootcert=/etc/dlock/ca.pem[&sslcert=client.pem&sslkey=client-key.pem]
//
// TLS takes libpq's parameters, which pgx reads: sslmode=verify-full
// verifies the server's certificate and its name (use it in production);
// sslrootcert names the CA's PEM file; sslcert and sslkey (and sslpassword
// for an encrypted key) give a client certificate, for cert authentication
// in pg_hba.conf. Verification is off only where libpq's sslmode says so:
// require (without sslrootcert), prefer and allow encrypt without verifying
// the server, and pgx's default is prefer, which also falls back to
// plaintext. A server that takes TLS only (hostssl lines) refuses
// sslmode=disable with "no pg_hba.conf entry … no encryption". Errors
// never show sslkey or sslpassword.
//
// # Modes
//
//		mode     how a lock is held                      a dead holder's lock ends   waiting                 cost while held
//		table    a row in dlock_locks with an expiry     at its TTL (renewed)        LISTEN/NOTIFY + expiry  nothing
//		row      SELECT … FOR UPDATE in an open tx       when its connection dies,   in the database         one connection
//		                                                 or a TTL after its last
//		                                                 statement
//		session  pg_advisory_lock on a session           as for row                  in the database         one connection
//
//	  - table (default): dlock_locks(name PRIMARY KEY, owner, holds, token,
//	    expires_at, label) and dlock_tokens(name PRIMARY KEY, token), created
//	    at Open if missing (or by `dlock migrate`, which is safe to run
//	    again); a dlock_locks made before holder labels gets its label column
//	    then. label is the first hold's dlock.WithLabel ("host:pid" by
//	    default), which Inspect reports. Acquire, re-entry and taking over
//	    an expired row are one statement; so are release (which NOTIFYs
//	    the tenant's channel: "Least privilege") and a whole renewal batch. Expiry is judged by the
//	    database's clock_timestamp(), never the client's. One LISTEN
//	    connection per client wakes waiters.
//	  - row: the lock is the row of dlock_rows named name, locked FOR UPDATE
//	    (by its primary key: PostgreSQL locks rows, never more, whatever the
//	    plan) in a transaction held open on a dedicated connection until Unlock.
//	  - session: pg_advisory_lock(hashtextextended(name, 0)) on a dedicated
//	    connection (read-write locks: pg_advisory_lock_shared and
//	    pg_advisory_lock on hashtextextended(name, 1)), so plain SQL users
//	    can take the same lock:
//	    SELECT pg_advisory_lock(hashtextextended('orders/sku-42', 0)).
//
// The three modes are three different locks: table mode's rows, row mode's
// FOR UPDATE and session mode's advisory locks do not exclude one another,
// so a client of one mode and a client of another both get the same name
// at once (an adversary pass, every pair). Every client of a name must use
// one mode. To switch modes, stop every client of the old mode before the
// first client of the new one starts: a rolling switch double-grants for
// as long as it lasts. dlock does not detect a mix.
//
// row and session modes have no room for a holder label: Inspect reports
// none. They hold one connection per held lock, at most max_held (default
// 16) at once (more Lock calls wait for a slot), and at most one less than
// the pool's connections (pool_max_conns): the client needs one more for
// the rest (row mode's tokens, ending a cancelled wait's connection). Row
// mode refuses a pool of one; session mode holds one lock on it. When the connection dies the server releases the lock
// at once; the holder learns of it at its next renewal (within TTL/3), so
// there is a window in which a new holder exists while the old one has not
// yet been told: fencing tokens cover it. A lease counts from the send time of a statement on the
// holding connection after the wait (session mode: the token's; row mode: a
// SELECT 1 after the token), never from before a wait. A wait that ctx
// ends terminates its backend (pg_terminate_backend with a wait) before Lock
// returns: a backend blocked in a lock wait would otherwise go on waiting
// until it noticed the closed connection, and could take the lock first.
// That takes up to 3 s more when the server does not answer, before the
// 2 s every backend may spend giving back a hold the cut request may have
// taken (see dlock's Mutex.Lock): a Lock cut by its ctx on a link that has
// gone silent returns up to about 5 s after ctx ends, in every mode.
// A TryLock waits for no holder (NOWAIT, pg_try_advisory_lock), and its
// other statements wait at most a second (lock_timeout) for a session
// outside dlock that holds dlock's tables or a row of them: an open
// transaction that inserted the same new name or locked the name's token
// row, a LOCK TABLE. It is then refused (ErrNotAcquired) if the lock's row
// was in question, or fails with an error that says so if its token was,
// and holds nothing either way. Lock waits for such a session as it waits
// for a holder. (Table mode's statements wait for them until ctx ends.)
//
// # A holder cut off (row and session modes)
//
// The lock lasts as long as the holding session. So that a holder cut off
// without a close (dropped packets, a frozen host) does not keep it for as
// long as the server believes the connection alive (about two hours with
// default keepalives), the holding session is bounded by its lease with
// session settings set in the statement that takes the lock (local to the
// transaction in row mode; put back before the connection returns to the
// pool in session mode):
//
//   - idle_in_transaction_session_timeout (row mode) or idle_session_timeout
//     (session mode) = the TTL in ms: the server ends the session, and so
//     frees the lock, a TTL after the holder's last statement. The holder
//     sends one every TTL/3 (its renewal) and its lease counts from that
//     statement's send time, so the server never frees the lock before the
//     holder's lease has ended; another client gets it within about
//     TTL + TTL/3 of the cut (3.0 to 3.1 s with a 3 s TTL in the tests,
//     through a proxy that drops everything). A holder paused longer than
//     its TTL loses its session the same way (its lease had ended).
//   - tcp_keepalives_idle and tcp_keepalives_interval = TTL/3 (whole
//     seconds, at least 1), tcp_keepalives_count = 3, tcp_user_timeout =
//     the TTL (at least 1 s), client_connection_check_interval = TTL/3
//     (100 ms to 1 s): the server also notices a dead peer while the session
//     waits for the lock or sends to it, on a network that drops packets.
//
// What remains: settings the server lacks are skipped. Before PostgreSQL 14
// there is no idle_session_timeout nor client_connection_check_interval:
// session mode then relies on the keepalives, which end the session on a
// network that drops packets (about TTL/3 + TTL) but not behind a proxy or
// pooler that keeps answering for the client. A waiter cut off while
// waiting is noticed by the keepalives and the connection check; if it is
// granted first, the idle timeout frees the lock a TTL later, so each such
// waiter can delay the next holder by up to a TTL.
//
// A longer Extend sets these settings anew for its TTL, in its one
// statement; a shorter one leaves them. pgx closes a connection whose
// statement's ctx ends mid-statement, which frees the lock: so a renewal's
// or an Extend's statement runs on for a third of its TTL, at most a
// second, after its ctx ends (sqlbase.Grace), and the call returns when it
// is done; one that has not finished by then is cut short and ends the
// lease (ErrLeaseLost), rather than leave it uncertain as table mode does.
// An Unlock whose ctx ends while such a statement runs cuts it short at
// once (closing the connection, which gives the lock up) rather than wait
// for it: its lease then ends lost.
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
// # Fencing tokens
//
// In every mode the token is the next value of the name's row in
// dlock_tokens. In row and session modes it is taken, and committed, right
// after the lock is granted, outside the lock's own transaction: were it
// taken inside, a holder that crashed would roll it back and the next holder
// would reuse its token.
//
// # Read-write locks and semaphores (table mode)
//
// Client.RWMutex and Client.Semaphore work in table mode, and RWMutex in
// session mode too; row mode reports ErrUnsupported with the reason (row
// locks let FOR SHARE pass a waiting FOR UPDATE, so writers could starve),
// and so does a Semaphore in session mode (advisory locks have no wait for
// one of N).
//
// Session mode: a read hold is pg_advisory_lock_shared and the write hold
// pg_advisory_lock, both on hashtextextended(name, 1) (the Mutex's key uses
// seed 0), so plain SQL users can take the same lock. PostgreSQL's lock
// manager queues a shared request behind a waiting exclusive one (and
// pg_try_advisory_lock_shared then fails), so a waiting writer keeps later
// readers out. Tokens come from the lock's row in dlock_kinds, taken and
// committed on the holding connection right after the grant; the holder's
// row in dlock_holds (with its backend pid) is only for Inspect, which
// counts a row while that pid holds the advisory lock.
//
// Table mode: a lock of a kind is a state row in dlock_kinds
// (name, family: 1 read-write, 2 semaphore; its token counter, arrival
// counter and the semaphore's permit count), its holds in dlock_holds
// (name, family, owner; kind, holds, token, expires_at, label) and, for a
// read-write lock, the records of refused readers and writers in
// dlock_waits (owner, kind, arrival number, expiry). An acquire is one
// transaction that locks the state row FOR UPDATE, drops expired holds and
// records and decides on what is left: a read needs no write hold and no
// writer waiting ahead of it, a write no hold and nobody waiting ahead of
// it, a permit fewer live holds than the count (which must match the
// stored one while there are holds: else ErrLimitMismatch). A refused read
// or write keeps its place with a record that lives 2 s at most (its TTL
// if shorter) unless its next attempt renews it; waiters come back within
// half that, and at once on a release (NOTIFY: "Least privilege"). So a waiting
// writer keeps later readers out and readers that waited before it go
// first; one that gives up holds the ones behind it back for at most 2 s.
// The transaction's BEGIN sets idle_in_transaction_session_timeout to the
// TTL, at most 5 s (sqlbase.MaxTxIdle), local to it, in the same round
// trip: a client paused or cut off between two of its statements, which
// holds the state row and so keeps every other client of the lock waiting,
// has its session ended by the server once idle that long (it used to hold
// the row until the server saw the connection die: for good behind a proxy
// that keeps it up; then for the requester's TTL, an hour for a lease of an
// hour). The bound is on each idle gap, not on the whole transaction (three
// round trips; a permit's two): a client that is slow rather than stopped, with a round
// trip near the bound, can keep the others waiting for a few bounds, and
// gets no grant itself (its session is ended, or the grant comes too late
// to be safe). Keep the TTL many round trips long. A permit's acquire
// locks the row, decides, grants and commits in one message after its
// BEGIN, so its client never holds the row across a round trip or its own
// scheduling (a re-entry then takes the three-round-trip transaction as
// well). Tokens come from the state row, so every grant of the lock, reads
// included, takes a greater one. Unlike a Mutex's, a failed release of a
// read hold or permit is not settled before the owner's next acquire: the
// hold stays until its TTL (it is not re-entered, as owners are fresh per
// call unless WithOwner).
//
// # TTL limits
//
// TTLs are whole milliseconds, from 6 ms (a grant must arrive with
// TTL/100 + 2ms + min(TTL/10, 1s) left) up to ten years; a TTL outside is
// refused with ErrInvalidTTL when the lock is made. Expiry is judged by
// the database's clock in table mode; in row and session mode the
// server-side timeouts that free a cut-off holder's lock are set from the
// TTL ("A holder cut off").
//
// # Per-name state that stays
//
// A name's token counter stays after its last release: its dlock_tokens
// row (table mode's mutexes, row and session modes), its dlock_kinds rows
// (one per family used: read-write lock, semaphore), and in row mode its
// dlock_rows row. Deleting one would let tokens start again at 1. That is
// one row of about 40 bytes plus the name (twice, with the primary key's
// index entry) per name ever locked: 10,000 names locked once leave 10,000
// dlock_tokens rows. Lock a bounded set of names, or retire counters as
// docs/design.md ("Per-name state that stays") describes.
//
// # Least privilege
//
// Let an owner account make the tables, once: `dlock migrate --backend
// postgres://dlock_owner:…@host/db` (or Client.Migrate), with a schema of its
// own first in its search_path. Workers then need only to read and write
// rows, and cannot alter the schema; Open makes nothing when the tables are
// there. As a superuser (or a role with CREATEROLE, plus the schema owner
// for the grants), for the schema "dlock":
//
//	CREATE ROLE dlock_owner LOGIN PASSWORD 'OWNER_PASSWORD';
//	CREATE SCHEMA dlock AUTHORIZATION dlock_owner;
//	ALTER ROLE dlock_owner SET search_path = dlock;
//	-- here: dlock migrate --backend postgres://dlock_owner:OWNER_PASSWORD@host/db
//	CREATE ROLE dlock_worker LOGIN PASSWORD 'PASSWORD';
//	GRANT USAGE ON SCHEMA dlock TO dlock_worker;
//	GRANT SELECT, INSERT, UPDATE, DELETE ON dlock.dlock_locks TO dlock_worker;
//	GRANT SELECT, INSERT, UPDATE ON dlock.dlock_tokens, dlock.dlock_rows TO dlock_worker;
//	GRANT SELECT, INSERT, UPDATE, DELETE ON dlock.dlock_kinds, dlock.dlock_holds, dlock.dlock_waits TO dlock_worker;
//	ALTER ROLE dlock_worker SET search_path = dlock;
//
// (or search_path=dlock in the worker's URL). The conformance suite's
// LeastPrivilege section runs exactly these statements, then the suite in every mode
// as dlock_worker. Advisory locks (session mode) need no grant. A missing
// privilege gives an error naming it ("permission denied for table
// dlock_locks", with what the user needs) that wraps dlock.ErrInvalidConfig,
// so Lock fails at once. Adding the label column to a dlock_locks made
// before holder labels needs its owner (dlock migrate).
//
// Tenants: give each its own schema, owner and worker role, as above. A
// worker of one can neither read, take, release nor overwrite another's
// locks (PostgreSQL refuses the other schema), in table and row modes.
// Advisory locks (session mode) are per database, not per schema: workers
// of tenants sharing a database can hold (and so block) each other's names,
// though never release them; give such tenants databases of their own.
// Within one tenant PostgreSQL cannot tell holders apart: a release deletes
// the holder's row, so a worker may delete any (table mode: dlock unlock
// --force needs only the worker grant, and so does --kind rw|sem). In row
// and session modes force unlock ends the holder's connection with
// pg_terminate_backend (session mode's --kind rw: every reader's and the
// writer's connection; row mode: what the force's own wait for the row is
// blocked by, as pg_blocking_pids tells, dlock's probes and the row's
// waiters excepted), which a
// role may do to the backends of any role it is a member of: an operator
// role is thus GRANT dlock_worker TO ops (pg_signal_backend is not needed
// for that; it lets a role end the backends of roles it is not a member of,
// superusers' excepted). Without either, the error names both.
//
// Releases are announced on a channel of the tenant's own,
// "dlock_release_<OID of its dlock_locks>", with md5(name) as the payload.
// PostgreSQL checks no privilege on LISTEN or NOTIFY and table OIDs are
// public, so a role of another tenant in the same database can listen
// there: it learns when a lock of a's was released and can confirm a name
// it guessed, but reads no name; and it can notify there, which only makes
// a's waiters try again (harmless: TestTenantAttacks). Clients of dlock
// versions before this one notify "dlock_release" with the name in clear;
// waiters of the two versions do not hear each other and fall back to
// their timers (at most 1 s) during an upgrade.
//
// Open checks the table privileges its mode needs and names every missing
// one ("table mode needs DELETE on dlock_locks").
package pglock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/dlock/dlock/internal/urlparam"
	"github.com/jackc/pgx/v5/pgxpool"
)

// URL schemes of the backend.
const (
	Scheme    = "postgres"
	SchemeAlt = "postgresql"
)

func init() {
	dlock.Register(Scheme, driver.OpenerFunc(openURL))
	dlock.Register(SchemeAlt, driver.OpenerFunc(openURL))
}

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
	// ClosePool makes Close of the dlock client close the pool too.
	ClosePool bool
}

// Open returns a dlock client over a pgx pool. Its tables are created if
// missing.
func Open(ctx context.Context, pool *pgxpool.Pool, opts Options) (*dlock.Client, error) {
	d, err := newDriver(ctx, pool, opts)
	if err != nil {
		return nil, err
	}
	return dlock.New(d, Scheme, opts.Client...), nil
}

func openURL(ctx context.Context, u *url.URL) (driver.Driver, error) {
	q := u.Query()
	mode, maxHeld, err := sqlbase.URLOptions("pglock", q)
	if err != nil {
		return nil, err
	}
	opts := Options{Mode: Mode(mode), MaxHeld: maxHeld, ClosePool: true}
	q.Del("mode")
	q.Del("max_held")
	if err := urlparam.Check(q, pgInts); err != nil {
		return nil, fmt.Errorf("pglock: %w: %v", dlock.ErrInvalidURL, err)
	}
	// pgx reads the query as libpq does ('+' is a plus, the last of a
	// repeated parameter wins), not as url.Values: the files are checked
	// as pgx will read them, and pgx gets the query as written.
	pq, raw, err := pgxQuery(u.RawQuery, "mode", "max_held")
	if err != nil {
		return nil, err
	}
	if err := checkFiles(ctx, pq, hasPassword(u)); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(connString(u, raw))
	if err != nil {
		return nil, fmt.Errorf("pglock: %w: %v", dlock.ErrInvalidURL, err)
	}
	if q.Get("pool_max_conns") == "" { // room for the held connections and the rest
		cfg.MaxConns = int32(max(opts.MaxHeld, 16) + 8)
	}
	during := watchDials(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pglock: connect: %w", causeFirst(err))
	}
	d, err := newDriver(ctx, pool, opts)
	if err != nil {
		// pgx closes each connection politely, waiting up to 15 s for the
		// server's goodbye: on a link cut during Open that was 15 s past
		// Open's ctx (an adversary pass). Open's own connections are
		// closed first, at once.
		during.closeAll()
		pool.Close()
		return nil, err
	}
	during.stop()
	return d, nil
}

// dials is the connections a pool dialled during Open, until stop. Once
// closeAll ran, the pool dials no more: pgx's close of a connection sends
// a cancel request on a new one first, and waited 15 s for its answer on
// the cut link.
type dials struct {
	mu      sync.Mutex
	conns   []net.Conn
	stopped bool
	failed  bool
}

// watchDials makes cfg's pool record its connections in the dials it
// returns.
func watchDials(cfg *pgxpool.Config) *dials {
	w := &dials{}
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		w.mu.Lock()
		failed := w.failed
		w.mu.Unlock()
		if failed {
			return nil, errors.New("pglock: Open failed: no new connection")
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.failed { // closeAll ran while this dialled: a re-test pass saw it wait the 15 s
			_ = c.Close()
			return nil, errors.New("pglock: Open failed: no new connection")
		}
		if !w.stopped {
			w.conns = append(w.conns, c)
		}
		return c, nil
	}
	return w
}

// stop ends the recording, and forgets what was recorded.
func (w *dials) stop() {
	w.mu.Lock()
	w.stopped, w.conns = true, nil
	w.mu.Unlock()
}

// closeAll closes the connections recorded, and stops.
func (w *dials) closeAll() {
	w.mu.Lock()
	conns := w.conns
	w.stopped, w.failed, w.conns = true, true, nil
	w.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// pgInts are pgx's sizes that it trusts (pool sizes, cache capacities),
// which dlock bounds like every backend's (see internal/urlparam); pgx
// checks the rest.
var pgInts = map[string]urlparam.Int{
	"pool_max_conns":      urlparam.Between(1, urlparam.MaxConns),
	"pool_min_conns":      urlparam.Pool,
	"pool_min_idle_conns": urlparam.Pool,
	// pgx makes a map of this many entries per connection.
	"statement_cache_capacity":   urlparam.Between(0, 100_000),
	"description_cache_capacity": urlparam.Between(0, 100_000),
}
