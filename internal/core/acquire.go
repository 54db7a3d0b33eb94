package core

// The one acquire path of every kind of lock, top to bottom: enter → re-enter
// → obtain (attempt, wait, undo: wait.go) → grant.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/keepalive"
	"github.com/dlock/dlock/internal/turn"
)

// Opts are the caller's options of an acquisition.
type Opts struct {
	TTL       time.Duration
	Label     string // "": the engine's default
	Owner     string // "": a fresh owner, or the one of a lease ctx carries
	NoRenewal bool
	Fresh     bool  // Owner was made for this one call
	Invalid   error // what making the lock found wrong, reported by every call
}

// Acquire takes a hold of kind s.Kind on s.Name for operation op (a
// Lock, TryLock, RLock... of package dlock): the one acquire path of every
// kind of lock. The caller runs the Call hook around it. alloc, if not nil,
// makes the zero lease it returns (package dlock's Lease holds it, so one
// allocation makes both); it is called only when Acquire succeeds.
func (e *Engine) Acquire(ctx context.Context, op string, s Spec, o Opts, try bool, alloc func() *Lease) (*Lease, error) {
	if ctx == nil {
		return nil, e.wrap(op, s.Name, ErrNilContext)
	}
	if o.Invalid != nil {
		return nil, e.wrap(op, s.Name, o.Invalid)
	}
	if err := e.beginAcquire(); err != nil {
		return nil, e.wrap(op, s.Name, err)
	}
	defer e.endAcquire()
	owner, fresh := o.Owner, o.Fresh
	if owner == "" {
		if l := leaseIn(ctx, e, s.Name, s.Kind, true); l != nil {
			owner = l.h.owner // a nested Lock re-enters the caller's hold
		} else {
			owner, fresh = newOwnerID(), true
		}
	}
	kind, err := e.kindFor(owner, s)
	if err != nil {
		return nil, e.wrap(op, s.Name, err)
	}
	k := holdKey{s.Name, owner, kind}
	t, err := e.enter(ctx, k, try)
	if err != nil {
		return nil, e.wrap(op, s.Name, gaveUp(ctx, err))
	}
	defer t.Done()
	label := o.Label
	if label == "" {
		label = e.cfg.Label
	}
	req := driver.Request{Name: s.Name, Owner: owner, Label: label, TTL: o.TTL, Kind: kind, Limit: s.Limit, Try: try}

	if l, err := e.reenter(ctx, k, req, !o.NoRenewal, alloc); l != nil || err != nil {
		return l, e.wrap(op, s.Name, err)
	}
	if err := e.releases.Await(ctx, k, e.closing.Done()); err != nil { // the owner's last hold is being released
		return nil, e.wrap(op, s.Name, gaveUp(ctx, err))
	}
	began := time.Now()
	var l *Lease
	var stale staleGrants // grants that came too late: paced, counted, told
	refused := func(err error) (*Lease, error) {
		err = gaveUp(ctx, stale.explain(err))
		if errors.Is(err, driver.ErrNotAcquired) {
			e.obs.Refused(ctx, Spec{Name: s.Name, Kind: req.Kind}, time.Since(began), err)
		}
		return nil, e.wrap(op, s.Name, err)
	}
	for {
		g, sent, err := e.obtain(ctx, t, req, try, fresh)
		if err == nil && fresh && g.Holds > 1 && e.caps.Reentrant {
			// Counts added by earlier attempts of this call whose replies
			// were lost: nobody else has this owner, and no lease would
			// release them, so the lock would outlive its Unlock.
			e.dropCounts(ctx, req, g, g.Holds-1)
		}
		if err != nil {
			return refused(err)
		}
		l, err = e.grant(ctx, k, req, g, sent, !o.NoRenewal, fresh, alloc)
		switch {
		case errors.Is(err, errStaleGrant) && try:
			return nil, e.wrap(op, s.Name, fmt.Errorf("%w: %w", driver.ErrNotAcquired, err))
		case errors.Is(err, errStaleGrant): // released; wait again, paced
			if err := stale.pause(ctx, e, err); err != nil {
				return refused(err)
			}
			continue
		case err != nil:
			return nil, e.wrap(op, s.Name, err)
		}
		break
	}
	e.obs.Acquired(ctx, l.h, time.Since(began))
	return l, nil
}

// leaseIn returns the innermost live lease of e's lock name that ctx
// carries, or nil. A lease past its deadline is not live: it is ended as
// lost here, as Err would.
// Only leases of kind's family count (a Mutex, RWMutex and Semaphore of one
// name are three locks).
func leaseIn(ctx context.Context, e *Engine, name string, kind driver.Kind, inCall bool) *Lease {
	for x, _ := ctx.Value(leaseKey{}).(*ctxLeases); x != nil; x = x.next {
		if x.l.h.e == e && x.l.h.name == name && x.l.h.kind.Family() == kind.Family() &&
			x.l.endCause() == nil && x.l.h.checkDeadline(inCall) == nil {
			return x.l
		}
	}
	return nil
}

// newOwnerID is NewOwnerID: 128 bits from crypto/rand, in hex.
func newOwnerID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// kindFor is the kind of hold an owner's request gets (see core.Spec.KindFor).
func (e *Engine) kindFor(owner string, s Spec) (driver.Kind, error) {
	return s.KindFor(func(k driver.Kind) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		h := e.holds[holdKey{s.Name, owner, k}]
		return h != nil && !h.detached
	})
}

// enter takes the owner's turn on the name, waiting for another acquisition
// by the same owner to finish. With try, it gives up with driver.ErrNotAcquired when
// that acquisition is blocked on another owner.
func (e *Engine) enter(ctx context.Context, k holdKey, try bool) (*turn.Turn[holdKey], error) {
	if e.mu.Lock(); e.closed {
		e.mu.Unlock()
		return nil, driver.ErrClosed
	}
	e.mu.Unlock()
	if t, ok := e.turns.TryTake(k); ok { // free: no wait for Close to end
		return t, nil
	}
	mode := turn.Wait
	if try {
		mode = turn.TryUnlessBlocked
	}
	t, err := e.turns.TakeUntil(ctx, k, mode, e.closing.Done())
	switch {
	case errors.Is(err, turn.ErrBusy):
		return nil, driver.ErrNotAcquired
	case errors.Is(err, turn.ErrStopped), err != nil && e.closing.Err() != nil:
		return nil, driver.ErrClosed
	}
	return t, err // as waitErr: an error matches ctx's
}

// Await waits until the latest release under k, if one is under way, is
// done. It returns ctx's error if ctx ends first, and driver.ErrClosed if
// closing is closed first. (It is Releases' one wait, so it is here, on
// the acquire path that waits, with the rest of Releases in releases.go.)
func (s *Releases[K]) Await(ctx context.Context, k K, closing <-chan struct{}) error {
	s.mu.Lock()
	r := s.m[k]
	if r == nil {
		s.mu.Unlock()
		return nil
	}
	if r.done == nil {
		r.done = make(chan struct{})
	}
	done := r.done
	s.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closing:
		return driver.ErrClosed
	}
}

// reenter gives the owner a new lease on the hold it has, if it has one.
// A re-entry asking for renewed leases into a fixed hold, or the reverse,
// is refused (ErrRenewalMismatch): the hold has one renewal, and its
// leases would otherwise get the first lease's, not the one they asked for.
func (e *Engine) reenter(ctx context.Context, k holdKey, req driver.Request, renew bool, alloc func() *Lease) (*Lease, error) {
	e.mu.Lock()
	h := e.holds[k]
	e.mu.Unlock()
	if h == nil || h.checkDeadline(true) != nil { // none, or past its deadline: lost
		return nil, nil
	}
	if err := (Spec{Name: req.Name, Kind: req.Kind, Limit: req.Limit}).CheckReentry(h.limit); err != nil {
		return nil, err
	}
	if h.ka.Renew != renew {
		return nil, fmt.Errorf("%w: the hold's leases are %s, this one asks to be %s", ErrRenewalMismatch, renewal(h.ka.Renew), renewal(renew))
	}
	if e.caps.Reentrant { // the store counts holds: count this one there too
		// which sets the store's expiry to req.TTL from when it is applied:
		// believe no more than that if it is shorter than the hold's.
		sent := time.Now()
		e.sched.Lower(&h.ka, sent, req.TTL)
		// Bound to Close as a first acquire is: a re-entry sent into a
		// silent network must not hold Close up for the client's retries.
		bctx, b := e.bindClose(ctx)
		g, err := e.drv.Acquire(bctx, req)
		e.unbind(b)
		if err != nil {
			return nil, e.waitErr(ctx, err)
		}
		if g.Acquired && g.Validity > 0 {
			e.sched.Lower(&h.ka, sent, g.Validity)
		}
		if !g.Acquired { // the store says another owner has it: ours is gone
			e.lostInCall(h, fmt.Errorf("%w: re-entry found another holder", driver.ErrLeaseLost))
			return nil, nil
		}
		if g.Token != h.token { // the owner's hold in the store is a later one: ours is gone
			later := h.Held()
			later.Token, later.Handle = g.Token, g.Handle
			_ = e.drv.Release(ctx, later, 1) // the count this attempt added
			e.lostInCall(h, fmt.Errorf("%w: re-entry found a later hold (token %d, ours %d)", driver.ErrLeaseLost, g.Token, h.token))
			return nil, nil
		}
	}
	e.mu.Lock()
	if e.closed { // Close began while the store counted this re-entry
		e.mu.Unlock()
		if !e.caps.Reentrant {
			return nil, driver.ErrClosed
		}
		// Close releases the counts of the leases it knows of, and this
		// one is not among them: give back the count this attempt added,
		// or the store keeps the lock until its TTL. (Close waits for
		// this, an acquisition under way, before it closes the driver.)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return nil, errors.Join(driver.ErrClosed, e.drv.Release(rctx, h.Held(), 1))
	}
	if h.detached { // lost, or its last lease unlocked, meanwhile
		e.mu.Unlock()
		if e.caps.Reentrant {
			// The Unlock that detached h released the counts of the leases
			// it knew of, not this one's: give it back (the store refuses it
			// if the hold is gone or has changed hands), or it keeps the
			// lock until its TTL under an owner that no longer holds it.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = e.drv.Release(rctx, h.Held(), 1)
		}
		return nil, nil
	}
	defer e.mu.Unlock()
	return h.newLease(alloc), nil
}

// renewal names a hold's renewal for ErrRenewalMismatch.
func renewal(renew bool) string {
	if renew {
		return "renewed"
	}
	return "fixed (WithoutRenewal)"
}

// errStaleGrant is the cause of a grant that came too late to be returned.
var errStaleGrant = errors.New("grant confirmed too late to be safe")

// grant turns a granted request into a hold, registered with the scheduler.
// It refuses (releases, and returns errStaleGrant) a grant whose proven
// validity, counted from the send time of the request that proved it, leaves
// less than keepalive.GrantMargin: a process paused while the lock was handed to it,
// or a slow round trip, must not get a lease that is about to end or has
// ended, whatever the driver said.
//
// fresh says that req.Owner was made for this hold alone: its last Unlock
// then releases every count the store has under it.
func (e *Engine) grant(ctx context.Context, k holdKey, req driver.Request, g driver.Grant, sent time.Time, renew, fresh bool, alloc func() *Lease) (*Lease, error) {
	if !g.Since.IsZero() { // the driver knows when the grant was proven
		sent = g.Since
		if now := time.Now(); now.Before(sent) { // never a time still to come
			sent = now
		}
	}
	validity := req.TTL
	if g.Validity > 0 && g.Validity < validity {
		validity = g.Validity
	}
	h := &Hold{
		e: e, name: req.Name, owner: req.Owner, label: req.Label, kind: req.Kind, limit: req.Limit, fresh: fresh,
		token: g.Token, handle: g.Handle, acquired: sent.Sub(epoch),
		ka: keepalive.Entry{TTL: req.TTL, Renew: renew, Lost: g.Lost},
	}
	h.ka.Ref = h
	stale := ""
	if left := time.Until(sent.Add(validity)); left < keepalive.GrantMargin(req.TTL) {
		stale = fmt.Sprintf("%v left of its validity, %v needed", left.Round(time.Millisecond), keepalive.GrantMargin(req.TTL))
	} else if keepalive.SessionEnded(g.Lost) {
		stale = "the store's session it was granted in has ended"
	}
	if stale != "" {
		e.log.Warn("dlock: grant came too late to be safe; released", "backend", e.cfg.Scheme, "name", req.Name,
			"token", g.Token, "why", stale)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = e.drv.Release(rctx, h.Held(), 1)
		return nil, fmt.Errorf("%w (%s)", errStaleGrant, stale)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := e.drv.Release(ctx, h.Held(), 1)
		return nil, errors.Join(driver.ErrClosed, err)
	}
	e.holds[k] = h
	l := h.newLease(alloc)
	e.mu.Unlock()
	e.sched.Add(&h.ka, sent, validity)
	return l, nil
}
