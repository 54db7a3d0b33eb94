package dlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock/dlock/internal/core"
)

// errUnlocked is the cause of a lease context ended by Unlock.
var errUnlocked = core.ErrUnlocked

// Lease is one hold on a lock, returned by Lock or TryLock. Its methods are
// safe for concurrent use. They are safe on a nil *Lease too, which a
// failed Lock returns: it holds nothing (Token 0, Done closed, Err and
// Unlock wrapping ErrNotHeld).
type Lease struct {
	l    core.Lease // the engine's, made in place (see alloc)
	c    *Client
	born int64 // when alloc made it, in ns since bornEpoch (see takenSince)
}

// bornEpoch is the origin of Lease.born: a monotonic clock reading.
var bornEpoch = time.Now()

// Name returns the lock's name.
func (l *Lease) Name() string {
	if l.none() {
		return ""
	}
	return l.l.Hold().Name()
}

// Owner returns the owner id holding the lease.
func (l *Lease) Owner() string {
	if l.none() {
		return ""
	}
	return l.l.Hold().Owner()
}

// Label returns the holder label stored with the lease's hold (see
// WithLabel).
func (l *Lease) Label() string {
	if l.none() {
		return ""
	}
	return l.l.Hold().Label()
}

// Token returns the fencing token: strictly greater than the token of every
// earlier holder of this lock name. Pass it to the protected resource and have
// it reject writes carrying a token lower than the highest it has seen.
// Re-entries share the token of the first hold. How far the guarantee holds
// across store failures depends on the backend: see its package doc.
func (l *Lease) Token() uint64 {
	if l.none() {
		return 0
	}
	return l.l.Hold().Token()
}

// Done is closed when the lease ends: by Unlock, Client.Close, expiry, a
// renewal that could not be confirmed in time, or the end of the store's
// session. Protected work should stop when it closes.
//
// Done and Err look at the lease's deadline themselves: once it has passed,
// the lease is ended as lost at the call, even if the client's scheduler has
// not run yet (after a pause of the process, say).
func (l *Lease) Done() <-chan struct{} {
	if l.none() {
		return closed
	}
	return l.l.Done()
}

// Err returns nil while the lease is live and after Unlock; after a loss, an
// error wrapping ErrLeaseLost; after Client.Close, one wrapping ErrClosed.
// On a nil *Lease, one wrapping ErrNotHeld. While an Unlock still waits
// for the store past the lease's deadline (nothing renews a lease being
// unlocked), Err returns an error wrapping ErrLeaseLost: the lock may be
// another's by then. Done closes only when that Unlock returns, and if its
// release succeeds, which proves the hold was still there, Err is nil again.
func (l *Lease) Err() error {
	if l.none() {
		return nilLease("lease")
	}
	return l.l.Err()
}

// TimeLeft returns how long the lease is known to be held: the time until
// the client would declare it lost if it were not renewed, which is never
// later than its expiry in the store. It is 0 once the lease has ended.
func (l *Lease) TimeLeft() time.Duration {
	if l.none() {
		return 0
	}
	return l.l.TimeLeft()
}

// As exposes the backend's own view of the lease (see the backend's package
// doc for the types it supports) and reports whether it could set target.
func (l *Lease) As(target any) bool {
	if l.none() {
		return false
	}
	if a, ok := l.l.Hold().Handle().(interface{ As(any) bool }); ok {
		return a.As(target)
	}
	return false
}

// Unlock ends the lease. The lock is released in the store when the owner's
// last lease on it is unlocked; Unlock never releases another owner's hold.
// It returns an error wrapping ErrLeaseLost if the lease had been lost, and
// ErrNotHeld if it was already unlocked. If the store cannot be reached, the
// lease still ends and is no longer renewed, so the lock frees itself at
// expiry; the error says so.
func (l *Lease) Unlock(ctx context.Context) error {
	if l.none() {
		return nilLease("unlock")
	}
	return unlock(ctx, l)
}

// nilLease is the error of op on a nil *Lease: there is no hold to act on.
func nilLease(op string) error {
	return &Error{Op: op, Err: fmt.Errorf("%w: the lease is nil", ErrNotHeld)}
}

// none reports whether l holds nothing: nil (a failed Lock's), or a
// Lease{} not made by dlock.
func (l *Lease) none() bool { return l == nil || l.l.Hold() == nil }

// closed is the Done channel of a lease that holds nothing.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// hold is the hold l is a lease on.
func (l *Lease) hold() *core.Hold { return l.l.Hold() }

// backend is the URL scheme of l's client, "" if it has none.
func (l *Lease) backend() string {
	if l.none() || l.c == nil {
		return ""
	}
	return l.c.obs.scheme
}
