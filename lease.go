package dlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/core"
	"github.com/dlock/dlock/internal/keepalive"
)

// errUnlocked is the cause of a lease context ended by Unlock.
var errUnlocked = errors.New("unlocked")

// Lease is one hold on a lock, returned by Lock or TryLock. Its methods are
// safe for concurrent use.
type Lease struct {
	h      *hold
	ctx    context.Context // cancelled, with the reason as cause, when the lease ends
	cancel context.CancelCauseFunc
	ended  bool // guarded by h.c.mu
}

// hold is what a client holds in the store for one (name, owner): one or
// more leases (re-entries) share it, with one fencing token and one renewal.
type hold struct {
	c        *Client
	name     string
	owner    string
	label    string
	kind     driver.Kind
	limit    int // a permit's semaphore count, compared on re-entry
	token    uint64
	handle   any
	acquired time.Time
	fresh    bool // the owner id was made for this hold: nobody else holds under it

	lostErr atomic.Pointer[error] // why the hold was lost, if it was

	// guarded by c.mu
	detached bool
	release  core.Release // its store release, once detached: a Lock by its owner waits for it
	leases   []*Lease
	first    [1]*Lease // room for the first lease, which most holds keep alone

	ka keepalive.Entry // its renewal, the scheduler's alone
}

func (h *hold) held() driver.Held {
	return driver.Held{Name: h.name, Owner: h.owner, TTL: h.ka.TTL, Kind: h.kind, Token: h.token, Handle: h.handle}
}

// heldOf is the hold of a scheduler entry, for its renewals.
func heldOf(e *keepalive.Entry) driver.Held { return e.Ref.(*hold).held() }

// newLease adds a lease to h. c.mu must be held.
func (h *hold) newLease() *Lease {
	l := &Lease{h: h}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	if h.leases == nil {
		h.leases = h.first[:0]
	}
	h.leases = append(h.leases, l)
	return l
}

// storeHolds is how many holds of h Close releases: those the client has
// in the store, or every count where the owner is h's alone.
func (h *hold) storeHolds() int {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.c.caps.Reentrant && h.fresh {
		return allHolds // with any count a re-entry added but failed to report
	}
	if h.c.caps.Reentrant {
		return max(len(h.leases), 1)
	}
	return 1
}

// end ends every lease of h with cause.
func (h *hold) end(cause error) {
	h.c.mu.Lock()
	ls := h.leases
	h.leases = nil
	for _, l := range ls {
		l.ended = true
	}
	h.c.mu.Unlock()
	for _, l := range ls {
		l.cancel(cause)
	}
}

// checkDeadline ends h as lost if its deadline has passed and it is still
// live, and returns the loss error then; otherwise nil.
func (h *hold) checkDeadline() error {
	if !h.c.sched.Due(&h.ka) {
		return nil
	}
	err := h.c.wrap("lease", h.name, keepalive.ExpiredErr(&h.ka))
	h.c.lost(h, keepalive.ExpiredErr(&h.ka))
	return err
}

// Name returns the lock's name.
func (l *Lease) Name() string { return l.h.name }

// Owner returns the owner id holding the lease.
func (l *Lease) Owner() string { return l.h.owner }

// Label returns the holder label stored with the lease's hold (see
// WithLabel).
func (l *Lease) Label() string { return l.h.label }

// Token returns the fencing token: strictly greater than the token of every
// earlier holder of this lock name. Pass it to the protected resource and have
// it reject writes carrying a token lower than the highest it has seen.
// Re-entries share the token of the first hold. How far the guarantee holds
// across store failures depends on the backend: see its package doc.
func (l *Lease) Token() uint64 { return l.h.token }

// Done is closed when the lease ends: by Unlock, Client.Close, expiry, a
// renewal that could not be confirmed in time, or the end of the store's
// session. Protected work should stop when it closes.
//
// Done and Err look at the lease's deadline themselves: once it has passed,
// the lease is ended as lost at the call, even if the client's scheduler has
// not run yet (after a pause of the process, say).
func (l *Lease) Done() <-chan struct{} {
	l.h.checkDeadline()
	return l.ctx.Done()
}

// Err returns nil while the lease is live and after Unlock; after a loss, an
// error wrapping ErrLeaseLost; after Client.Close, one wrapping ErrClosed.
func (l *Lease) Err() error {
	if err := l.h.checkDeadline(); err != nil {
		if c := context.Cause(l.ctx); c != nil && c != errUnlocked {
			return c
		}
		return err
	}
	select {
	case <-l.ctx.Done():
	default:
		return l.h.lostCause() // lost, its Done about to close
	}
	if cause := context.Cause(l.ctx); cause != errUnlocked {
		return cause
	}
	return nil
}

// lostCause is why h was lost, or nil.
func (h *hold) lostCause() error {
	if p := h.lostErr.Load(); p != nil {
		return *p
	}
	return nil
}

// TimeLeft returns how long the lease is known to be held: the time until
// the client would declare it lost if it were not renewed, which is never
// later than its expiry in the store. It is 0 once the lease has ended.
func (l *Lease) TimeLeft() time.Duration {
	if l.ctx.Err() != nil {
		return 0
	}
	return l.h.c.sched.TimeLeft(&l.h.ka)
}

// As exposes the backend's own view of the lease (see the backend's package
// doc for the types it supports) and reports whether it could set target.
func (l *Lease) As(target any) bool {
	if a, ok := l.h.handle.(interface{ As(any) bool }); ok {
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
func (l *Lease) Unlock(ctx context.Context) (uerr error) {
	ctx, end := l.h.c.call(ctx, "unlock", l.h.name, l.h.kind, l.h.token)
	defer func() { end(l.h.token, uerr) }()
	h, c := l.h, l.h.c
	if ctx == nil {
		return c.wrap("unlock", h.name, ErrNilContext)
	}
	c.mu.Lock()
	if l.ended {
		c.mu.Unlock()
		if err := l.Err(); err != nil {
			return err
		}
		return c.wrap("unlock", h.name, ErrNotHeld)
	}
	l.ended = true
	for i, x := range h.leases {
		if x == l {
			h.leases = append(h.leases[:i], h.leases[i+1:]...)
			break
		}
	}
	last := len(h.leases) == 0
	c.mu.Unlock()

	if last && !c.detach(h) { // lost or closed while we unlocked
		cause := h.lostCause()
		if cause == nil {
			cause = context.Cause(l.ctx)
		}
		if cause != nil {
			l.cancel(cause)
		}
		l.cancel(errUnlocked)
		return cause
	}
	var err error
	if last || c.caps.Reentrant {
		n := 1
		if last && h.fresh {
			n = allHolds // with any count a re-entry added but failed to report
		}
		err = c.drv.Release(ctx, h.held(), n)
	}
	if last {
		c.freed(h)
	}
	if err != nil {
		err = c.wrap("unlock", h.name, err)
		if errors.Is(err, ErrLeaseLost) {
			l.cancel(err)
			if !last {
				c.lost(h, err)
			} else if c.hooks.Lost != nil { // found lost by the release itself: say so as any loss
				c.hooks.Lost(ctx, h.event(err))
			}
			return err
		}
	}
	l.cancel(errUnlocked)
	if c.hooks.Released != nil {
		c.hooks.Released(ctx, h.event(nil))
	}
	return err
}

// allHolds is a count of holds no owner reaches: Release drops them all.
const allHolds = 1 << 30

// call runs the Call hook, if there is one, for a call beginning with ctx.
// It returns the ctx the call goes on with and the function to call with its
// outcome (the granted token, or 0, and the call's error). A nil ctx is
// left alone: the call itself refuses it.
func (c *Client) call(ctx context.Context, op, name string, kind driver.Kind, token uint64) (context.Context, func(token uint64, err error)) {
	if c.hooks.Call == nil || ctx == nil {
		return ctx, func(uint64, error) {}
	}
	ctx, end := c.hooks.Call(ctx, Call{Op: op, Backend: c.scheme, Name: name, Kind: kind.String(), Token: token})
	if end == nil {
		end = func(uint64, error) {}
	}
	return ctx, end
}
