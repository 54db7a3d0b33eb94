package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/keepalive"
)

// ErrUnlocked is the cause of a lease context ended by Unlock.
var ErrUnlocked = errors.New("unlocked")

// AllHolds is a count of holds no owner reaches: Release drops them all.
const AllHolds = 1 << 30

type holdKey struct {
	name, owner string
	kind        driver.Kind // families and kinds are held apart
}

// Hold is what an engine holds in the store for one (name, owner, kind):
// one or more leases (re-entries) share it, with one fencing token and one
// renewal.
type Hold struct {
	e        *Engine
	name     string
	owner    string
	label    string
	kind     driver.Kind
	limit    int // a permit's semaphore count, compared on re-entry
	token    uint64
	handle   any
	acquired time.Duration // when its acquire was sent, since epoch (a third of a time.Time)
	fresh    bool          // the owner id was made for this hold: nobody else holds under it
	detached bool          // guarded by e.mu; beside fresh, so that a Hold fits 256 bytes

	lostErr atomic.Pointer[error] // why the hold was lost, if it was

	// guarded by e.mu
	release Release // its store release, once detached: a Lock by its owner waits for it
	leases  []*Lease
	first   [1]*Lease // room for the first lease, which most holds keep alone

	ka keepalive.Entry // its renewal, the scheduler's alone
}

// Lease is one hold on a lock: package dlock's Lease is a thin wrapper.
type Lease struct {
	h     *Hold
	cause atomic.Pointer[error]    // why it ended, once it has (see leaseend.go)
	lctx  atomic.Pointer[leaseCtx] // its context, once asked for
	ended bool                     // guarded by h.e.mu
}

// Name returns the lock name.
func (h *Hold) Name() string { return h.name }

// Owner returns the owner id.
func (h *Hold) Owner() string { return h.owner }

// Label returns the holder label.
func (h *Hold) Label() string { return h.label }

// Kind returns the kind of hold.
func (h *Hold) Kind() driver.Kind { return h.kind }

// Token returns the fencing token.
func (h *Hold) Token() uint64 { return h.token }

// Handle returns the driver's handle of the hold.
func (h *Hold) Handle() any { return h.handle }

// Acquired returns when the hold was proven granted.
func (h *Hold) Acquired() time.Time { return epoch.Add(h.acquired) }

// epoch is the origin of Hold.acquired: a monotonic clock reading, so that
// Acquired keeps one too.
var epoch = time.Now()

// Entry is h's scheduler entry, for tests.
func (h *Hold) Entry() *keepalive.Entry { return &h.ka }

// Held is h as the driver knows it.
func (h *Hold) Held() driver.Held {
	return driver.Held{Name: h.name, Owner: h.owner, TTL: h.ka.TTL, Kind: h.kind, Token: h.token, Handle: h.handle}
}

// heldOf is the hold of a scheduler entry, for its renewals.
func heldOf(k *keepalive.Entry) driver.Held { return k.Ref.(*Hold).Held() }

// newLease adds a lease to h, made by alloc if not nil. e.mu must be held.
func (h *Hold) newLease(alloc func() *Lease) *Lease {
	var l *Lease
	if alloc != nil {
		l = alloc()
	} else {
		l = new(Lease)
	}
	l.h = h
	if h.leases == nil {
		h.leases = h.first[:0]
	}
	h.leases = append(h.leases, l)
	return l
}

// storeHolds is how many holds of h Close releases: those the client has
// in the store, or every count where the owner is h's alone.
func (h *Hold) storeHolds() int {
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	if h.e.caps.Reentrant && h.fresh {
		return AllHolds // with any count a re-entry added but failed to report
	}
	if h.e.caps.Reentrant {
		return max(len(h.leases), 1)
	}
	return 1
}

// end ends every lease of h with cause.
func (h *Hold) end(cause error) {
	h.e.mu.Lock()
	ls := h.leases
	h.leases = nil
	for _, l := range ls {
		l.ended = true
	}
	h.e.mu.Unlock()
	for _, l := range ls {
		l.cancel(cause)
	}
}

// CheckDeadline ends h as lost if its deadline has passed and it is still
// live, and returns the loss error then; otherwise nil.
func (h *Hold) CheckDeadline() error { return h.checkDeadline(false) }

// checkDeadline is CheckDeadline; inCall says the caller is inside a call
// Close waits for (see lostHook).
func (h *Hold) checkDeadline(inCall bool) error {
	if !h.e.sched.Due(&h.ka) {
		return nil
	}
	lost := h.e.sched.ExpiredErr(&h.ka)
	err := h.e.wrap("lease", h.name, lost)
	h.e.lost(h, lost, inCall)
	return err
}

// lostCause is why h was lost, or nil.
func (h *Hold) lostCause() error {
	if p := h.lostErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Hold returns the hold l is a lease on.
func (l *Lease) Hold() *Hold { return l.h }

// Context is cancelled, with the reason as its cause (ErrUnlocked after
// Unlock), when l ends.
func (l *Lease) Context() context.Context { return l.context() }

// Done is dlock.Lease.Done.
func (l *Lease) Done() <-chan struct{} {
	l.h.CheckDeadline()
	return l.context().Done()
}

// Err is dlock.Lease.Err.
func (l *Lease) Err() error {
	if err := l.h.CheckDeadline(); err != nil {
		if c := l.endCause(); c != nil && c != ErrUnlocked {
			return c
		}
		return err
	}
	cause := l.endCause()
	if cause == nil {
		if lost := l.h.lostCause(); lost != nil {
			return lost // lost, its end about to be stored
		}
		if l.h.e.sched.RemovedPastDeadline(&l.h.ka) {
			// Its Unlock is waiting for the store past the lease's
			// deadline: the lock may be another's by now (its release
			// has not confirmed otherwise). Err said nil until the Unlock
			// returned, while another client held the lock (an
			// adversary pass, PostgreSQL row mode).
			return l.h.e.wrap("lease", l.h.name, errUnlockPastDeadline)
		}
		return nil
	}
	if cause != ErrUnlocked {
		return cause
	}
	return nil
}

// errUnlockPastDeadline is what Err says of a lease whose Unlock waits for
// the store past the lease's deadline.
var errUnlockPastDeadline = fmt.Errorf("%w: its deadline passed while its Unlock waited for the store", driver.ErrLeaseLost)

// TimeLeft is dlock.Lease.TimeLeft.
func (l *Lease) TimeLeft() time.Duration {
	if l.endCause() != nil {
		return 0
	}
	return l.h.e.sched.TimeLeft(&l.h.ka)
}

// Unlock is dlock.Lease.Unlock, inside its Call hook.
func (l *Lease) Unlock(ctx context.Context) error {
	h, e := l.h, l.h.e
	if ctx == nil {
		return e.wrap("unlock", h.name, ErrNilContext)
	}
	e.mu.Lock()
	if l.ended {
		e.mu.Unlock()
		if err := l.Err(); err != nil {
			return err
		}
		return e.wrap("unlock", h.name, driver.ErrNotHeld)
	}
	l.ended = true
	for i, x := range h.leases {
		if x == l {
			h.leases = append(h.leases[:i], h.leases[i+1:]...)
			break
		}
	}
	last := len(h.leases) == 0
	// The last lease detaches its hold in the same step that found it last:
	// a re-entry must not add a lease to a hold this Unlock then releases
	// (it sees the hold detached and gives its store count back).
	detached := false
	if last && !h.detached {
		e.detachLocked(h)
		detached = true
	}
	e.beginCallLocked() // Close keeps the driver open for this release
	e.mu.Unlock()
	defer e.endAcquire()
	if detached {
		e.sched.Remove(&h.ka)
	}

	if last && !detached { // lost or closed while we unlocked
		cause := h.lostCause()
		if cause == nil {
			cause = l.endCause()
		}
		if cause != nil {
			l.cancel(cause)
		}
		l.cancel(ErrUnlocked)
		return cause
	}
	var err error
	if last || e.caps.Reentrant {
		n := 1
		if last && h.fresh {
			n = AllHolds // with any count a re-entry added but failed to report
		}
		err = e.drv.Release(ctx, h.Held(), n)
	}
	if last {
		e.freed(h)
	}
	if err != nil {
		err = e.wrap("unlock", h.name, err)
		if errors.Is(err, driver.ErrLeaseLost) {
			l.cancel(err)
			if !last {
				e.lostInCall(h, err)
			} else { // found lost by the release itself: say so as any loss
				e.lostHook(ctx, h, err, true)
			}
			return err
		}
	}
	l.cancel(ErrUnlocked)
	e.obs.Released(ctx, h)
	return err
}

// Extend is dlock.Lease.Extend, inside its Call hook.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	h, e := l.h, l.h.e
	if ctx == nil {
		return e.wrap("extend", h.name, ErrNilContext)
	}
	if err := e.CheckTTL(ttl); err != nil {
		return e.wrap("extend", h.name, err)
	}
	if err := l.Err(); err != nil {
		return err
	}
	if l.endCause() != nil {
		return e.wrap("extend", h.name, driver.ErrNotHeld)
	}
	removed, err := e.sched.Extend(ctx, &h.ka, ttl)
	if errors.Is(err, driver.ErrLeaseLost) {
		e.Lost(h, err) // Close does not wait for an Extend
	}
	// The lease's own end (lost, closed) says it best; but an Unlock under
	// way, which detached the hold, ends it as unlocked, with no error to
	// report, and the store's answer must not be lost for that: an Extend
	// the store refused, cut short by that Unlock, reported success.
	if removed || err != nil {
		if lerr := l.Err(); lerr != nil {
			return lerr
		}
	}
	return e.wrap("extend", h.name, err)
}
