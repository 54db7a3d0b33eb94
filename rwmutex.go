package dlock

import (
	"context"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/core"
)

// ErrUpgrade is returned by RWMutex.Lock and TryLock when their owner holds
// the read lock: a read-to-write upgrade would deadlock (two readers each
// waiting for the other to leave), so it is refused. Unlock the read lease
// and take the write lock instead.
var ErrUpgrade = core.ErrUpgrade

// RWMutex is a distributed read-write lock, made by Client.RWMutex: any
// number of readers (RLock) hold it together, a writer (Lock) holds it
// alone. A waiting writer blocks the readers that arrive after it, so a
// stream of readers cannot starve it. Each hold is a *Lease with the life of
// a Mutex's lease: renewed, lost, ended by Unlock, with a fencing token; a
// write hold's token is greater than that of every earlier hold of the lock,
// reads included.
//
// An RWMutex, a Mutex and a Semaphore of the same name are three different
// locks. Re-entry follows the Mutex's rules (a ctx carrying a live lease,
// or WithOwner), and besides: a writer that takes the read lock under its
// write hold gets a lease on the write hold; a reader that takes the write
// lock gets ErrUpgrade. Its methods are safe for concurrent use.
type RWMutex struct {
	c    *Client
	name string
	opts mutexOptions // with Invalid: invalid arguments or an unsupported backend, reported by every method
}

// RWMutex returns a read-write lock named name, with the Mutex's options.
// Making it does not touch the store; invalid arguments, or a backend that
// cannot hold read-write locks (ErrUnsupported, with the reason), are
// reported by its methods.
func (c *Client) RWMutex(name string, opts ...Option) *RWMutex {
	o := mutexOptions{Opts: core.Opts{TTL: DefaultTTL}}
	for _, opt := range opts {
		opt(&o)
	}
	o.Invalid = validate(c.e, name, o)
	if caps := c.e.Caps(); o.Invalid == nil && !(caps.Supports(driver.Shared) && caps.Supports(driver.Write)) {
		o.Invalid = c.e.Unsupported("read-write locks")
	}
	return &RWMutex{c: c, name: name, opts: o}
}

// Name returns the lock's name.
func (rw *RWMutex) Name() string { return rw.name }

// Err reports what making the RWMutex found wrong, which its methods also
// return: invalid arguments, or ErrUnsupported with the reason when the
// backend cannot hold read-write locks; nil when it is usable. Check it at
// start-up to fail early.
func (rw *RWMutex) Err() error { return rw.c.e.Wrap("rwmutex", rw.name, rw.opts.Invalid) }

// RLock blocks until the read lock is held and returns its lease; ctx
// bounds the wait as for Mutex.Lock.
func (rw *RWMutex) RLock(ctx context.Context) (*Lease, error) {
	return lock(ctx, rw.c, "rlock", core.Spec{Name: rw.name, Kind: driver.Shared}, rw.opts, false)
}

// TryRLock makes one attempt at the read lock: it returns an error wrapping
// ErrNotAcquired when a writer holds the lock or waits for it.
func (rw *RWMutex) TryRLock(ctx context.Context) (*Lease, error) {
	return lock(ctx, rw.c, "tryrlock", core.Spec{Name: rw.name, Kind: driver.Shared}, rw.opts, true)
}

// Lock blocks until the write lock is held and returns its lease; ctx
// bounds the wait as for Mutex.Lock.
func (rw *RWMutex) Lock(ctx context.Context) (*Lease, error) {
	return lock(ctx, rw.c, "lock", core.Spec{Name: rw.name, Kind: driver.Write}, rw.opts, false)
}

// TryLock makes one attempt at the write lock: it returns an error wrapping
// ErrNotAcquired when anyone else holds the lock.
func (rw *RWMutex) TryLock(ctx context.Context) (*Lease, error) {
	return lock(ctx, rw.c, "trylock", core.Spec{Name: rw.name, Kind: driver.Write}, rw.opts, true)
}

// RLocker returns a Locker whose Lock and TryLock take the read lock, for Do.
func (rw *RWMutex) RLocker() Locker { return rlocker{rw} }

type rlocker struct{ rw *RWMutex }

func (r rlocker) Lock(ctx context.Context) (*Lease, error)    { return r.rw.RLock(ctx) }
func (r rlocker) TryLock(ctx context.Context) (*Lease, error) { return r.rw.TryRLock(ctx) }

// ForceUnlock drops every hold of the read-write lock, its readers' and
// its writer's, whoever holds them; with tokens, only the holds with those
// fencing tokens (Info.Holders' Token, as Inspect showed them), so that an
// operator drops no hold granted after it looked. It is for operators
// clearing a stuck lock by hand: the holders find out at their next renewal
// (their leases end with ErrLeaseLost), waiters are served as after a
// release, and the next holder's token is greater than every dropped one.
// Like Inspect it needs a handle made from the name only. Backends without
// read-write locks, or that cannot drop their holds, return ErrUnsupported.
func (rw *RWMutex) ForceUnlock(ctx context.Context, tokens ...uint64) error {
	return rw.c.e.ForceRelease(ctx, rw.name, driver.Shared, "read-write locks", tokens)
}

// Inspect describes the read-write lock as the store has it: Info.Holders
// lists its readers and writer, and Owner, Token and TTL describe the
// writer if there is one. It reads the store only: rw's options play no
// part, so a handle made from a name just to read it will do. Backends
// without read-write locks return ErrUnsupported.
func (rw *RWMutex) Inspect(ctx context.Context) (Info, error) {
	di, err := rw.c.e.Inspect(ctx, rw.name, driver.Shared, "read-write locks")
	return Info(di), err
}
