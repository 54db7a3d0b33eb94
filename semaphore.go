package dlock

import (
	"context"
	"fmt"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/core"
)

// Semaphore is a distributed counting semaphore, made by Client.Semaphore:
// at most its permit count of holders at once, across every client of the
// store. Each permit is a *Lease with the life of a Mutex's lease (renewed,
// lost, freed at its TTL when its holder dies, ended by Unlock) and a
// fencing token of its own. The permit count is stored with the semaphore
// where the backend has room for it: Acquire with another count while
// others hold permits fails with ErrLimitMismatch. A Semaphore, a Mutex and
// an RWMutex of the same name are three different locks. Re-entry follows
// the Mutex's rules: a ctx carrying a live permit of the semaphore, or
// WithOwner, shares that permit. Its methods are safe for concurrent use.
type Semaphore struct {
	c     *Client
	name  string
	limit int
	opts  mutexOptions // with Invalid: invalid arguments or an unsupported backend
}

// Semaphore returns a semaphore named name with n permits, with the
// Mutex's options. Making it does not touch the store; invalid arguments
// (n < 1 is ErrInvalidConfig), or a backend without semaphores
// (ErrUnsupported, with the reason), are reported by its methods.
func (c *Client) Semaphore(name string, n int, opts ...Option) *Semaphore {
	o := mutexOptions{Opts: core.Opts{TTL: DefaultTTL}}
	for _, opt := range opts {
		opt(&o)
	}
	o.Invalid = validate(c.e, name, o)
	switch {
	case o.Invalid != nil:
	case n < 1:
		o.Invalid = fmt.Errorf("%w: a semaphore needs at least one permit, not %d", ErrInvalidConfig, n)
	case !c.e.Caps().Supports(driver.Permit):
		o.Invalid = c.e.Unsupported("semaphores")
	}
	return &Semaphore{c: c, name: name, limit: n, opts: o}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Err reports what making the Semaphore found wrong, which its methods
// also return: invalid arguments, or ErrUnsupported with the reason when
// the backend cannot hold semaphores; nil when it is usable. Check it at
// start-up to fail early.
func (s *Semaphore) Err() error { return s.c.e.Wrap("semaphore", s.name, s.opts.Invalid) }

// Limit returns the permit count the semaphore was made with.
func (s *Semaphore) Limit() int { return s.limit }

// Inspect describes the semaphore as the store has it: Info.Limit is the
// permit count stored with it (which can differ from s.Limit while others
// hold permits) and Info.Holders its permit holders. It reads the store
// only: s's permit count and options play no part, so a handle made from a
// name just to read it will do. Backends without semaphores return
// ErrUnsupported.
func (s *Semaphore) Inspect(ctx context.Context) (Info, error) {
	di, err := s.c.e.Inspect(ctx, s.name, driver.Permit, "semaphores")
	return Info(di), err
}

// ForceUnlock drops every permit of the semaphore whoever holds it; with
// tokens, only the permits with those fencing tokens (Info.Holders' Token,
// as Inspect showed them), so that an operator drops no permit granted
// after it looked. It is for operators clearing a stuck semaphore by hand:
// the holders find out at their next renewal (their leases end with
// ErrLeaseLost), waiters are served as after a release, and the next
// holder's token is greater than every dropped one. s's permit count plays
// no part. Backends without semaphores, or that cannot drop their permits,
// return ErrUnsupported.
func (s *Semaphore) ForceUnlock(ctx context.Context, tokens ...uint64) error {
	return s.c.e.ForceRelease(ctx, s.name, driver.Permit, "semaphores", tokens)
}

// Acquire blocks until a permit is held and returns its lease; ctx bounds
// the wait as for Mutex.Lock.
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	return lock(ctx, s.c, "acquire", s.spec(), s.opts, false)
}

// TryAcquire makes one attempt: it returns an error wrapping ErrNotAcquired
// when every permit is held.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	return lock(ctx, s.c, "tryacquire", s.spec(), s.opts, true)
}

// Locker returns a Locker whose Lock and TryLock are Acquire and
// TryAcquire, for Do.
func (s *Semaphore) Locker() Locker { return semLocker{s} }

type semLocker struct{ s *Semaphore }

func (l semLocker) Lock(ctx context.Context) (*Lease, error)    { return l.s.Acquire(ctx) }
func (l semLocker) TryLock(ctx context.Context) (*Lease, error) { return l.s.TryAcquire(ctx) }

func (s *Semaphore) spec() core.Spec {
	return core.Spec{Name: s.name, Kind: driver.Permit, Limit: s.limit}
}
