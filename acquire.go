package dlock

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
	"github.com/dlock/dlock/internal/core"
	"github.com/dlock/dlock/internal/keepalive"
	"github.com/dlock/dlock/internal/turn"
)

// acquire takes a hold of kind s.Kind on s.Name: the one acquire path of
// every kind of lock, run inside the Call hook.
func (c *Client) acquire(ctx context.Context, op string, s lockSpec, try bool) (*Lease, error) {
	ctx, end := c.call(ctx, op, s.Name, s.Kind, 0)
	l, err := c.acquireHold(ctx, op, s, try)
	var token uint64
	if l != nil {
		token = l.h.token
	}
	end(token, err)
	return l, err
}

func (c *Client) acquireHold(ctx context.Context, op string, s lockSpec, try bool) (*Lease, error) {
	if ctx == nil {
		return nil, c.wrap(op, s.Name, ErrNilContext)
	}
	if s.err != nil {
		return nil, c.wrap(op, s.Name, s.err)
	}
	owner, fresh := s.opts.owner, s.opts.fresh
	if owner == "" {
		if l := leaseIn(ctx, c, s.Name, s.Kind); l != nil {
			owner = l.h.owner // a nested Lock re-enters the caller's hold
		} else {
			owner, fresh = newOwnerID(), true
		}
	}
	kind, err := c.kindFor(owner, s)
	if err != nil {
		return nil, c.wrap(op, s.Name, err)
	}
	k := holdKey{s.Name, owner, kind}
	t, err := c.enter(ctx, k, try)
	if err != nil {
		return nil, c.wrap(op, s.Name, gaveUp(ctx, err))
	}
	defer t.Done()
	label := s.opts.label
	if label == "" {
		label = c.label
	}
	req := driver.Request{Name: s.Name, Owner: owner, Label: label, TTL: s.opts.ttl, Kind: kind, Limit: s.Limit, Try: try}

	if l, err := c.reenter(ctx, k, req); l != nil || err != nil {
		return l, c.wrap(op, s.Name, err)
	}
	if err := c.releases.Await(ctx, k, c.closing.Done()); err != nil { // the owner's last hold is being released
		return nil, c.wrap(op, s.Name, gaveUp(ctx, err))
	}
	began := time.Now()
	var l *Lease
	var stale staleGrants // grants that came too late: paced, counted, told
	refused := func(err error) (*Lease, error) {
		err = gaveUp(ctx, stale.explain(err))
		if c.hooks.Refused != nil && errors.Is(err, ErrNotAcquired) {
			c.hooks.Refused(ctx, newEvent(c, s.Name, req.Kind, 0, time.Since(began), err))
		}
		return nil, c.wrap(op, s.Name, err)
	}
	for {
		g, sent, err := c.obtain(ctx, t, req, try, fresh)
		if err == nil && fresh && g.Holds > 1 && c.caps.Reentrant {
			// Counts added by earlier attempts of this call whose replies
			// were lost: nobody else has this owner, and no lease would
			// release them, so the lock would outlive its Unlock.
			c.dropCounts(ctx, req, g, g.Holds-1)
		}
		if err != nil {
			return refused(err)
		}
		l, err = c.grant(ctx, k, req, g, sent, !s.opts.noRenewal, fresh)
		switch {
		case errors.Is(err, errStaleGrant) && try:
			return nil, c.wrap(op, s.Name, fmt.Errorf("%w: %w", ErrNotAcquired, err))
		case errors.Is(err, errStaleGrant): // released; wait again, paced
			if err := stale.pause(ctx, c, err); err != nil {
				return refused(err)
			}
			continue
		case err != nil:
			return nil, c.wrap(op, s.Name, err)
		}
		break
	}
	if c.hooks.Acquired != nil {
		c.hooks.Acquired(ctx, newEvent(c, s.Name, req.Kind, l.h.token, time.Since(began), nil))
	}
	return l, nil
}

// leaseIn returns the innermost live lease of c's lock name that ctx
// carries, or nil. A lease past its deadline is not live: it is ended as
// lost here, as Err would.
// Only leases of kind's family count (a Mutex, RWMutex and Semaphore of one
// name are three locks).
func leaseIn(ctx context.Context, c *Client, name string, kind driver.Kind) *Lease {
	for x, _ := ctx.Value(leaseKey{}).(*ctxLeases); x != nil; x = x.next {
		if x.l.h.c == c && x.l.h.name == name && x.l.h.kind.Family() == kind.Family() &&
			x.l.ctx.Err() == nil && x.l.h.checkDeadline() == nil {
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
func (c *Client) kindFor(owner string, s lockSpec) (driver.Kind, error) {
	return s.KindFor(func(k driver.Kind) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		h := c.holds[holdKey{s.Name, owner, k}]
		return h != nil && !h.detached
	})
}

// enter takes the owner's turn on the name, waiting for another acquisition
// by the same owner to finish. With try, it gives up with ErrNotAcquired when
// that acquisition is blocked on another owner.
func (c *Client) enter(ctx context.Context, k holdKey, try bool) (*turn.Turn[holdKey], error) {
	if c.mu.Lock(); c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.mu.Unlock()
	if t, ok := c.turns.TryTake(k); ok { // free: no wait for Close to end
		return t, nil
	}
	ctx, stop := c.bindClose(ctx)
	defer stop()
	mode := turn.Wait
	if try {
		mode = turn.TryUnlessBlocked
	}
	t, err := c.turns.Take(ctx, k, mode)
	switch {
	case errors.Is(err, turn.ErrBusy):
		return nil, ErrNotAcquired
	case err != nil && c.closing.Err() != nil:
		return nil, ErrClosed
	}
	return t, err // as waitErr: an error matches ctx's
}

// bindClose returns a ctx that also ends when the client closes, for a
// wait, and the function that lets it go.
func (c *Client) bindClose(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.closing, cancel)
	return ctx, func() { stop(); cancel() }
}

// reenter gives the owner a new lease on the hold it has, if it has one.
func (c *Client) reenter(ctx context.Context, k holdKey, req driver.Request) (*Lease, error) {
	c.mu.Lock()
	h := c.holds[k]
	c.mu.Unlock()
	if h == nil || h.checkDeadline() != nil { // none, or past its deadline: lost
		return nil, nil
	}
	if err := (core.Spec{Name: req.Name, Kind: req.Kind, Limit: req.Limit}).CheckReentry(h.limit); err != nil {
		return nil, err
	}
	if c.caps.Reentrant { // the store counts holds: count this one there too
		// which sets the store's expiry to req.TTL from when it is applied:
		// believe no more than that if it is shorter than the hold's.
		sent := time.Now()
		c.sched.Lower(&h.ka, sent, req.TTL)
		g, err := c.drv.Acquire(ctx, req)
		if err != nil {
			return nil, err
		}
		if g.Acquired && g.Validity > 0 {
			c.sched.Lower(&h.ka, sent, g.Validity)
		}
		if !g.Acquired { // the store says another owner has it: ours is gone
			c.lost(h, fmt.Errorf("%w: re-entry found another holder", ErrLeaseLost))
			return nil, nil
		}
		if g.Token != h.token { // the owner's hold in the store is a later one: ours is gone
			later := h.held()
			later.Token, later.Handle = g.Token, g.Handle
			_ = c.drv.Release(ctx, later, 1) // the count this attempt added
			c.lost(h, fmt.Errorf("%w: re-entry found a later hold (token %d, ours %d)", ErrLeaseLost, g.Token, h.token))
			return nil, nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.detached { // lost meanwhile
		return nil, nil
	}
	return h.newLease(), nil
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
func (c *Client) grant(ctx context.Context, k holdKey, req driver.Request, g driver.Grant, sent time.Time, renew, fresh bool) (*Lease, error) {
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
	h := &hold{
		c: c, name: req.Name, owner: req.Owner, label: req.Label, kind: req.Kind, limit: req.Limit, fresh: fresh,
		token: g.Token, handle: g.Handle, acquired: sent,
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
		c.log.Warn("dlock: grant came too late to be safe; released", "backend", c.scheme, "name", req.Name,
			"token", g.Token, "why", stale)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = c.drv.Release(rctx, h.held(), 1)
		return nil, fmt.Errorf("%w (%s)", errStaleGrant, stale)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := c.drv.Release(ctx, h.held(), 1)
		return nil, errors.Join(ErrClosed, err)
	}
	c.holds[k] = h
	l := h.newLease()
	c.mu.Unlock()
	c.sched.Add(&h.ka, sent, validity)
	return l, nil
}
