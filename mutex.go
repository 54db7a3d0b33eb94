package dlock

import (
	"context"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/core"
)

// Mutex is a distributed mutual-exclusion lock, made by Client.Mutex. Its
// methods are safe for concurrent use; each successful Lock or TryLock returns
// a Lease that must be unlocked.
type Mutex struct {
	c    *Client
	name string
	opts mutexOptions
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Err reports what making the Mutex found wrong (an invalid name, TTL,
// owner or label), which its methods also return; nil when it is usable.
// Check it at start-up to fail early.
func (m *Mutex) Err() error { return m.c.e.Wrap("mutex", m.name, m.opts.Invalid) }

// Inspect describes the lock as the store has it, as Client.Inspect does:
// its holder's owner id, hold count, fencing token and time left.
func (m *Mutex) Inspect(ctx context.Context) (Info, error) { return m.c.Inspect(ctx, m.name) }

// Owner returns the owner id set with WithOwner, or "" when each Lock is a
// holder of its own (then Lease.Owner tells a lease's id).
func (m *Mutex) Owner() string { return m.opts.Owner }

// Lock blocks until the lock is held and returns its lease. ctx bounds the
// wait only: the lease lasts until Unlock, Client.Close or its loss. When ctx
// ends first, Lock returns an error matching both ErrNotAcquired and ctx's
// error, and leaves nothing behind in the store. To keep that, a Lock or
// TryLock whose last request went unanswered (its ctx ended on it, or the
// link failed), and which may so have taken the lock, looks for that hold
// and gives it back before it returns: against a store that has gone
// silent, up to 2 s after ctx ends (Memcached and PostgreSQL take longer:
// see their package docs).
//
// Each call is a holder of its own, so concurrent calls exclude each other,
// unless the Mutex was made WithOwner (calls share the owner's hold) or ctx
// carries a live lease of this lock from this client (ContextWithLease; the
// ctx Do passes to its function): the call then re-enters that hold at once.
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) { return m.acquire(ctx, "lock", false) }

// TryLock makes one attempt: it returns an error wrapping ErrNotAcquired when
// another owner holds the lock.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) { return m.acquire(ctx, "trylock", true) }

func (m *Mutex) acquire(ctx context.Context, op string, try bool) (*Lease, error) {
	return lock(ctx, m.c, op, core.Spec{Name: m.name, Kind: driver.Exclusive}, m.opts, try)
}
