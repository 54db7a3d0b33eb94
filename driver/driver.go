// Package driver defines the interface that dlock backends implement.
//
// Users never call a driver directly: they use package dlock, which validates
// input, keeps reentrancy counts where the store cannot, schedules renewals,
// signals lost leases and waits for locks. A driver only talks to its store.
//
// # Contracts
//
// Every method must be safe for concurrent use. A method that fails must say
// whether the failure is certain:
//
//   - ErrLeaseLost (or an error wrapping it) means the store said the caller does
//     not hold the lock: it expired, was deleted, or belongs to another owner.
//   - ErrNotAcquired is not used by drivers: a failed attempt is a Grant with
//     Acquired false.
//   - Any other error (a timeout, a reset connection) is uncertain: the
//     operation may or may not have taken effect. dlock retries renewals that
//     fail this way and only declares a lease lost when it can no longer be
//     sure it is still held.
//
// Time: a grant or renewal is valid for its TTL counted from the moment the
// request was sent (dlock measures that on its monotonic clock), unless the
// driver returns a shorter Validity.
package driver

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"
)

// Sentinel errors shared by drivers and package dlock (which re-exports them).
var (
	// ErrNotAcquired means the lock is held by another owner.
	ErrNotAcquired = errors.New("dlock: lock not acquired: held by another owner")
	// ErrLeaseLost means the caller's hold on the lock ended without Unlock.
	ErrLeaseLost = errors.New("dlock: lease lost")
	// ErrNotHeld means the caller does not hold the lock it tried to release.
	ErrNotHeld = errors.New("dlock: lock not held")
	// ErrClosed means the client or driver was closed.
	ErrClosed = errors.New("dlock: client closed")
	// ErrInvalidName means the lock name is empty, malformed or too long.
	ErrInvalidName = errors.New("dlock: invalid lock name")
	// ErrInvalidTTL means the TTL is not positive or cannot be kept by the store.
	ErrInvalidTTL = errors.New("dlock: invalid TTL")
	// ErrInvalidOwner means the owner id is empty or too long.
	ErrInvalidOwner = errors.New("dlock: invalid owner id")
	// ErrInvalidLabel means a holder label is too long or malformed.
	ErrInvalidLabel = errors.New("dlock: invalid holder label")
	// ErrInvalidURL means a backend URL is malformed or has bad parameters.
	ErrInvalidURL = errors.New("dlock: invalid backend URL")
	// ErrInvalidConfig means a backend was given a configuration it cannot
	// work with, such as too few Redlock nodes.
	ErrInvalidConfig = errors.New("dlock: invalid backend configuration")
	// ErrUnsupported means the backend cannot do what was asked.
	ErrUnsupported = errors.New("dlock: unsupported by this backend")
	// ErrUnknownScheme means no backend is registered for a URL scheme.
	ErrUnknownScheme = errors.New("dlock: unknown backend scheme")
	// ErrLimitMismatch means a semaphore was opened with a permit count other than the one its live
	// holders use.
	ErrLimitMismatch = errors.New("dlock: semaphore permit count mismatch")
)

// Kind is the kind of hold a request asks for.
//
// # Families
//
// The kinds make three families of locks, kept apart in the store: a Mutex
// (Exclusive), a read-write lock (Shared and Write) and a semaphore (Permit)
// of the same name are three independent locks, in different keys, paths or
// rows, as Redisson's getLock, getReadWriteLock and getSemaphore and
// Curator's recipes are. Each family has its own fencing-token counter per
// name.
//
// # Read-write locks
//
// A Shared grant needs no Write hold and no Write waiter queued ahead of it:
// a waiting writer blocks the readers that arrive after it, so a stream of
// readers cannot starve it. A Write grant needs no other hold of either kind.
// Waiters are served in arrival order where the store queues them.
//
// # Semaphores
//
// There are never more than Request.Limit live Permit holds of a name. The
// limit is stored with the semaphore where the store's layout has room for
// it (a backend whose layout has not says so in its package doc): a Request
// whose Limit differs from the stored one while the semaphore has live holds
// fails with an error wrapping ErrLimitMismatch; with no live holds, the new
// Limit replaces the old.
//
// # Tokens, owners, life
//
// Every grant of any kind takes a new token from the lock's counter, so
// tokens strictly increase: a Write grant's token is greater than that of
// every earlier grant of the read-write lock, reads included, and each permit
// holder has its own token. Holds are per (family, name, owner, kind): a
// second request of the same kind by the same owner re-enters (counted in the
// store where Caps.Reentrant, otherwise by dlock within a client). dlock
// itself handles a writer taking the read lock under its write hold (it gets
// a lease on the write hold, with no driver call) and refuses a read-to-write
// upgrade (it would deadlock), so drivers need not handle one owner holding
// two kinds at once. Renewal, release, loss, Grant.Since, Validity and Lost
// are as for Exclusive; the release of a read hold or a permit must wake the
// store's waiters (Notifier or Blocking, as the store allows).
type Kind int

const (
	// Exclusive is a mutex hold: one owner at a time.
	Exclusive Kind = iota
	// Shared is a read hold of a read-write lock: any number of readers,
	// none while a Write hold is held or a Write waiter is queued ahead.
	Shared
	// Permit is one of Request.Limit permits of a counting semaphore.
	Permit
	// Write is the write hold of a read-write lock: no other hold of either
	// kind at the same time.
	Write
)

// String returns the kind's name: "exclusive", "shared", "permit" or "write".
func (k Kind) String() string {
	switch k {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	case Permit:
		return "permit"
	case Write:
		return "write"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Family is the lock a kind of hold belongs to: a Mutex, a read-write lock
// or a semaphore. A Mutex, an RWMutex and a Semaphore of one name are three
// locks, so dlock and the stores keep the families apart; its value is the
// number the SQL backends store for it.
type Family int

// The families of kinds.
const (
	FamilyMutex     Family = iota // Exclusive
	FamilyRWMutex                 // Shared and Write
	FamilySemaphore               // Permit
)

// Family returns the family of kind k.
func (k Kind) Family() Family {
	switch k {
	case Shared, Write:
		return FamilyRWMutex
	case Permit:
		return FamilySemaphore
	}
	return FamilyMutex
}

// Holder describes one live hold of a read-write lock or semaphore, in
// Info.Holders.
type Holder struct {
	Owner string        // the holder's owner id
	Label string        // the holder's label, where the store keeps it
	Kind  Kind          // Shared, Write or Permit
	Token uint64        // the hold's fencing token
	Holds int           // the owner's hold count (re-entries)
	TTL   time.Duration // time left on the hold's lease; 0 if unknown
}

// Request asks for a hold on a lock.
type Request struct {
	Name  string        // lock name, validated by dlock against Caps
	Owner string        // owner id; a second request by the same owner re-enters
	TTL   time.Duration // lease length, validated by dlock against Caps
	Kind  Kind          // Exclusive unless the driver's Caps list other kinds
	Limit int           // number of permits, for Kind Permit
	// Label is a readable name of the holder (default "host:pid"), stored
	// with the hold where the store has room for it and reported by Inspect
	// in Info.Label. It does not take part in ownership.
	Label string
	// Wait asks the driver to block until the hold is granted or ctx ends.
	// dlock sets it only when Caps.Blocking is true. A driver that returns
	// because ctx ended must leave nothing of the request behind in the store.
	Wait bool
	// Try marks a single attempt (TryLock, TryRLock, TryAcquire) that will
	// not be repeated: a driver that keeps records of refused requests to
	// queue them (waiting readers and writers) must not leave one for a
	// refused try, or a caller polling with tries would queue behind its own
	// earlier attempts (each try is an owner of its own).
	Try bool
}

// Grant is the answer to a Request.
type Grant struct {
	// Acquired reports whether the hold was granted.
	Acquired bool
	// Token is the fencing token of the hold: greater than the token of every
	// earlier holder of the name. A re-entry returns the first hold's token.
	Token uint64
	// Holds is the owner's hold count after the request (1 on a first grant),
	// for stores that keep counts (Caps.Reentrant).
	Holds int
	// Validity, when positive, is how long the hold is known to be valid
	// counted from the moment the request was sent. Zero means the TTL.
	Validity time.Duration
	// Since, when not zero, is the moment Validity counts from, instead of
	// the moment the Acquire call began. Blocking drivers set it to the send
	// time of the store request after which the hold was granted.
	Since time.Time
	// Retry, when the hold was not granted, is the time left on the current
	// holder's lease if the store knows it; waiters retry no later than that.
	Retry time.Duration
	// Lost, if not nil, is closed when the store signals that the hold is gone
	// (a session expired, a lease was revoked). Holds of one session should
	// share one channel: dlock watches each distinct channel once.
	Lost <-chan struct{}
	// Handle is the driver's own state for the hold; dlock passes it back in
	// Renewal and Release.
	Handle any
}

// Held names a hold the caller has, for Renew and Release.
type Held struct {
	Name   string
	Owner  string
	TTL    time.Duration
	Kind   Kind
	Token  uint64
	Handle any
}

// RenewResult is the outcome of renewing one hold.
type RenewResult struct {
	// Err is nil when the hold was extended by its TTL, ErrLeaseLost when the
	// store says it is no longer held, or another (uncertain) error.
	Err error
	// Validity is as in Grant.
	Validity time.Duration
}

// Info describes the state of a lock, for operators.
type Info struct {
	Name    string
	Held    bool
	Owner   string        // the holder's owner id
	Label   string        // the holder's label (Request.Label), where the store keeps it
	Holds   int           // the holder's hold count
	Token   uint64        // the holder's fencing token
	TTL     time.Duration // time left on the holder's lease; 0 if unknown
	Waiters int           // waiters queued in the store, if it keeps a queue
	// Notes carries backend-specific remarks, such as a warning that the
	// store may evict lock keys.
	Notes []string
	// Kind is the kind of lock described: Exclusive for Inspect; Shared
	// (or Write) for a read-write lock and Permit for a semaphore, from
	// KindInspector.
	Kind Kind
	// Limit is a semaphore's stored permit count (0 if unknown or none).
	Limit int
	// Holders lists every live hold of a read-write lock or semaphore. For
	// those, Held reports whether there is any, and Owner, Label, Holds,
	// Token and TTL describe the write hold if there is one, else the hold
	// with the greatest token.
	Holders []Holder
	// Election reports that the hold is an election's term (Lister only):
	// Label is then the leader's value and Token its term.
	Election bool
}

// Caps describes what a driver's store can do and keep.
type Caps struct {
	// MaxNameLen is the longest name in bytes the store accepts (0: 1024).
	MaxNameLen int
	// MinTTL, MaxTTL and TTLResolution bound the TTLs the store can keep.
	// A TTL that is not a multiple of TTLResolution is rejected.
	MinTTL, MaxTTL, TTLResolution time.Duration
	// TTLNote, when MinTTL or MaxTTL is a limit of the store's setup
	// rather than of its protocol, says where the limit comes from and
	// how to change it; dlock puts it in the ErrInvalidTTL error of a TTL
	// out of bounds.
	TTLNote string
	// Reentrant reports that the store keeps a hold count per owner, so that
	// re-entries by one owner from several processes are counted there.
	// Otherwise dlock counts re-entries within one client.
	Reentrant bool
	// Blocking reports that Acquire honours Request.Wait by queueing in the
	// store itself (etcd, ZooKeeper, database row locks). Otherwise dlock
	// waits with Notifier subscriptions, or by polling with backoff.
	Blocking bool
	// Kinds lists the kinds beyond Exclusive the driver supports: Shared and
	// Write come together (a read-write lock), Permit alone (a semaphore).
	// A driver with Kinds implements KindInspector.
	Kinds []Kind
	// KindsNote, when Kinds lacks some kinds, says why the store cannot hold
	// them; dlock puts it in the ErrUnsupported error of a RWMutex or
	// Semaphore made on the driver.
	KindsNote string
	// NoElection, when not empty, says why the store cannot hold a leader
	// election safely even on its lock machinery (Memcached may evict the
	// leader's key); package dlock then refuses every Election made on the
	// driver with ErrUnsupported and this reason.
	NoElection string
}

// Supports reports whether c lists kind k (Exclusive always).
func (c Caps) Supports(k Kind) bool {
	if k == Exclusive {
		return true
	}
	for _, x := range c.Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// Driver is an open connection to a lock store.
type Driver interface {
	// Caps returns the store's capabilities; it must not change after Open.
	Caps() Caps
	// Acquire makes one attempt at a hold (or, with Request.Wait, blocks).
	Acquire(ctx context.Context, req Request) (Grant, error)
	// Renew extends every hold in the batch by its TTL, in as few calls to
	// the store as it allows, and returns one result per hold, in order.
	Renew(ctx context.Context, batch []Held) []RenewResult
	// Release drops count holds of h's owner (all of them when count is at
	// least the hold count). It must never release
	// another owner's hold, nor a later hold of the same name: that returns
	// ErrLeaseLost (check the token). dlock also calls Release, best-effort,
	// for a hold it has declared lost, so the driver can free what it keeps
	// for the hold and the store can drop what is left of it. It calls
	// Release with Token 0 (no hold has it) for a Shared or Write request
	// whose wait it gave up on a driver without Caps.Blocking: a driver
	// that keeps a record of the waiting request, to keep its place in
	// line, drops it then and wakes the waiters behind it.
	Release(ctx context.Context, h Held, count int) error
	// Inspect describes the lock named name.
	Inspect(ctx context.Context, name string) (Info, error)
	// Close releases the driver's connections. It does not release holds.
	Close() error
	// As lets users reach driver-specific types (see package dlock's As).
	As(target any) bool
}

// Notifier is implemented by drivers whose store can announce releases.
type Notifier interface {
	// Subscribe starts listening for releases of name. The subscription must
	// be in place when Subscribe returns, so a release after it is not missed.
	Subscribe(ctx context.Context, name string) (Subscription, error)
}

// Subscription delivers release notifications for one name.
type Subscription interface {
	// C receives a value (coalesced) after a release of the name.
	C() <-chan struct{}
	// Close stops the subscription.
	Close() error
}

// KindInspector is implemented by drivers with Kinds: it describes the
// read-write lock (kind Shared or Write) or semaphore (Permit) named name,
// with every live hold in Info.Holders and, for a semaphore, the stored
// permit count in Info.Limit.
type KindInspector interface {
	InspectKind(ctx context.Context, name string, kind Kind) (Info, error)
}

// NameChecker is implemented by drivers whose store refuses some names that
// dlock's own checks accept (ZooKeeper's path rules): CheckName returns an
// error wrapping ErrInvalidName for such a name, so that it is refused when
// the lock is made, before anything is sent.
type NameChecker interface {
	CheckName(name string) error
}

// ForceReleaser is implemented by drivers that can delete a lock whatever its
// owner, for operators (dlock unlock --force): whoever holds it if token is
// 0, else only a hold with that token (the holder an operator was shown;
// a later holder is kept).
type ForceReleaser interface {
	ForceRelease(ctx context.Context, name string, token uint64) error
}

// KindForceReleaser is implemented by drivers with Kinds that can drop the
// holds of a read-write lock (kind Shared, which names the family) or of a
// semaphore (Permit) whoever holds them, for operators (dlock unlock
// --force --kind): those whose tokens are in tokens, or every hold if
// tokens is empty. A hold granted since, with a token not in tokens, is
// kept. Waiters are served as after a release; the holders find out at
// their next renewal, and the token counter goes on, so the next holder's
// token is greater.
type KindForceReleaser interface {
	ForceReleaseKind(ctx context.Context, name string, kind Kind, tokens []uint64) error
}

// Migrator is implemented by drivers whose store needs a schema (the SQL
// backends): Migrate creates what is missing and is safe to run again.
type Migrator interface {
	Migrate(ctx context.Context) error
}

// Opener opens a driver for a URL whose scheme it was registered under.
type Opener interface {
	OpenDriver(ctx context.Context, u *url.URL) (Driver, error)
}

// OpenerFunc adapts a function to Opener.
type OpenerFunc func(ctx context.Context, u *url.URL) (Driver, error)

// OpenDriver calls f.
func (f OpenerFunc) OpenDriver(ctx context.Context, u *url.URL) (Driver, error) { return f(ctx, u) }
