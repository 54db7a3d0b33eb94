// Package dlock is distributed locking for Go over the stores teams already
// run — Redis (single, Sentinel, Cluster), Redlock, etcd, ZooKeeper,
// PostgreSQL, MySQL/MariaDB, Memcached, and an in-process store for tests —
// behind one API:
//
//	c, err := dlock.Open(ctx, "redis://127.0.0.1:6379") // import _ "github.com/dlock/dlock/redislock"
//	defer c.Close()
//	m := c.Mutex("orders/sku-42")
//	err = dlock.Do(ctx, m, func(ctx context.Context, l *dlock.Lease) error {
//		return sell(ctx, l.Token()) // ctx ends if the lease is lost
//	}, dlock.MaxWait(5*time.Second))
//
// The package itself imports only the standard library: each backend lives in
// a package of its own (memlock, redislock, redlock, etcdlock, zklock,
// pglock, mysqllock, memcachedlock) that registers its URL scheme when
// imported, as database/sql drivers do, and implements the small interface
// of package driver. Package drivertest is the conformance suite every
// backend passes against a real server.
//
// # Guarantees
//
// On every backend, within what its package doc says of its store:
//
//   - Mutual exclusion: Lock and TryLock return a lease only while the lock is
//     held for it. A grant that comes too late to be safe (a process paused
//     while the lock was handed to it) is released, never returned.
//   - Every Lock is a holder of its own, so goroutines sharing a Mutex exclude
//     each other as with sync.Mutex. Re-entry only when asked: through a ctx
//     carrying a live lease of the lock (Do's, ContextWithLease), or by a
//     shared owner id (WithOwner).
//   - No deadlock: a lease expires at its TTL (or when the store's session
//     or connection ends) if its holder dies. A watchdog renews live leases
//     every TTL/3, in one batch per client.
//   - Loss is signalled before expiry: a lease that cannot be confirmed is
//     declared lost (Lease.Done closes, Lease.Err wraps ErrLeaseLost, Do's
//     ctx is cancelled) a margin before the store could give the lock to
//     someone else, whatever a store call in flight is doing.
//   - Only the owner can unlock; Unlock never releases a later holder's lock.
//   - Fencing tokens (Lease.Token) strictly increase with each new holder,
//     so the protected resource can refuse a stale holder's writes. How far
//     they survive store failures differs by backend (etcd, ZooKeeper and
//     the SQL backends persist them; Redis and Memcached may not).
//
// What no lock can do: a holder paused longer than its TTL (a long GC, a
// frozen VM) runs on after another process got the lock, until it next
// looks at Done or Err. Fencing tokens are the defence; docs/reliability.md
// shows what the fault suite observed on each backend.
//
// # Read-write locks and semaphores
//
// Client.RWMutex is a read-write lock (RLock, Lock, TryRLock, TryLock,
// RLocker for Do) and Client.Semaphore a counting semaphore (Acquire,
// TryAcquire, Locker for Do), on the backends whose stores can hold them
// (others return ErrUnsupported with the reason). Every hold is a *Lease
// with the life above and a fencing token of its own; a write hold's token
// is above every earlier hold's of the lock, reads included. A waiting
// writer keeps later readers out, so readers cannot starve it; a
// semaphore's permit count is stored with it (ErrLimitMismatch for another
// count while it has holders). A Mutex, an RWMutex and a Semaphore of one
// name are three different locks.
//
// # URLs
//
// Open picks the backend by the URL's scheme: mem://, redis://, rediss://,
// redis+sentinel://, redis+cluster://, redlock://, etcd://, etcds://,
// zk://, postgres://, mysql://, memcached://. A host part may list several
// hosts separated by commas. Each backend's package doc lists its
// parameters. TLS takes the same parameters on every backend but
// PostgreSQL (which takes libpq's sslmode, sslrootcert, sslcert, sslkey):
// the TLS scheme (rediss, etcds) or tls=true, then ca=, cert=, key=, and
// insecure_skip_verify=true, the only way to turn verification off.
// Passwords in URLs, and TLS key paths and key passwords, never appear in
// errors or logs.
//
// # Errors
//
// Errors of lock operations are *Error values (operation, backend and lock
// name) that wrap one of the sentinel errors, for errors.Is: ErrNotAcquired
// (held by another owner, also when a wait ended with its ctx: the error
// then matches ctx's error too), ErrLeaseLost, ErrNotHeld, ErrClosed,
// ErrInvalidName, ErrInvalidTTL, ErrInvalidOwner, ErrInvalidLabel, ErrInvalidURL,
// ErrInvalidConfig, ErrUnsupported, ErrUnknownScheme, ErrNilContext,
// ErrRenewalMismatch (a re-entry whose WithoutRenewal differs from its
// hold's), and for the kinds above ErrLimitMismatch and ErrUpgrade.
// The store's own error, where there is one, stays reachable with errors.As.
// An operation the store itself failed (a connection lost or ended, a
// server's error) that waits for nothing (TryLock, Unlock, Extend,
// Inspect, ForceUnlock) returns that error, wrapped in *Error, and matches
// no sentinel; a waiting Lock tries again until its ctx ends, and then
// matches ErrNotAcquired and ctx's error.
//
// Bad arguments are errors, never panics: a nil ctx, locker or function,
// an invalid name or TTL. A nil *Lease or *Term, which a failed Lock or
// Campaign returns, is safe to use and holds nothing. The handles a Client
// makes (Mutex, RWMutex, Semaphore, Election) and the Client itself are
// like database/sql's *DB: a method on a nil one, or on one not made by
// Open or New, panics.
package dlock
