package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock/dlock/driver"
)

// Mutex is a distributed mutual-exclusion lock, made by Client.Mutex. Its
// methods are safe for concurrent use; each successful Lock or TryLock returns
// a Lease that must be unlocked.
type Mutex struct {
	c    *Client
	name string
	opts mutexOptions
	err  error // invalid arguments, reported by every method
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Err reports what making the Mutex found wrong (an invalid name, TTL,
// owner or label), which its methods also return; nil when it is usable.
// Check it at start-up to fail early.
func (m *Mutex) Err() error { return m.c.wrap("mutex", m.name, m.err) }

// Owner returns the owner id set with WithOwner, or "" when each Lock is a
// holder of its own (then Lease.Owner tells a lease's id).
func (m *Mutex) Owner() string { return m.opts.owner }

// Lock blocks until the lock is held and returns its lease. ctx bounds the
// wait only: the lease lasts until Unlock, Client.Close or its loss. When ctx
// ends first, Lock returns an error matching both ErrNotAcquired and ctx's
// error, and leaves nothing behind in the store.
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
	return m.c.acquire(ctx, op, lockSpec{name: m.name, opts: m.opts, err: m.err, kind: driver.Exclusive}, try)
}

// lockSpec is what acquire needs of a Mutex, RWMutex or Semaphore.
type lockSpec struct {
	name  string
	opts  mutexOptions
	err   error       // invalid arguments, reported by every method
	kind  driver.Kind // Exclusive, Shared, Write or Permit
	limit int         // a Semaphore's permit count
}

// acquire takes a hold of kind s.kind on s.name: the one acquire path of
// every kind of lock, run inside the Call hook.
func (c *Client) acquire(ctx context.Context, op string, s lockSpec, try bool) (*Lease, error) {
	ctx, end := c.call(ctx, op, s.name, s.kind, 0)
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
		return nil, c.wrap(op, s.name, ErrNilContext)
	}
	if s.err != nil {
		return nil, c.wrap(op, s.name, s.err)
	}
	owner, fresh := s.opts.owner, s.opts.fresh
	if owner == "" {
		if l := leaseIn(ctx, c, s.name, s.kind); l != nil {
			owner = l.h.owner // a nested Lock re-enters the caller's hold
		} else {
			owner, fresh = NewOwnerID(), true
		}
	}
	kind, err := c.kindFor(owner, s)
	if err != nil {
		return nil, c.wrap(op, s.name, err)
	}
	k := holdKey{s.name, owner, kind}
	t, err := c.enter(ctx, k, try)
	if err != nil {
		return nil, c.wrap(op, s.name, gaveUp(ctx, err))
	}
	defer t.Done()
	label := s.opts.label
	if label == "" {
		label = c.label
	}
	req := driver.Request{Name: s.name, Owner: owner, Label: label, TTL: s.opts.ttl, Kind: kind, Limit: s.limit, Try: try}

	if l, err := c.reenter(ctx, k, req); l != nil || err != nil {
		return l, c.wrap(op, s.name, err)
	}
	if err := c.awaitFreed(ctx, k); err != nil { // the owner's last hold is being released
		return nil, c.wrap(op, s.name, gaveUp(ctx, err))
	}
	began := time.Now()
	var l *Lease
	var stale staleGrants // grants that came too late: paced, counted, told
	refused := func(err error) (*Lease, error) {
		err = gaveUp(ctx, stale.explain(err))
		if c.hooks.Refused != nil && errors.Is(err, ErrNotAcquired) {
			c.hooks.Refused(ctx, Event{Backend: c.scheme, Name: s.name, Kind: kindName(req.Kind), Wait: time.Since(began), Err: err})
		}
		return nil, c.wrap(op, s.name, err)
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
			return nil, c.wrap(op, s.name, fmt.Errorf("%w: %w", ErrNotAcquired, err))
		case errors.Is(err, errStaleGrant): // released; wait again, paced
			if err := stale.pause(ctx, c, err); err != nil {
				return refused(err)
			}
			continue
		case err != nil:
			return nil, c.wrap(op, s.name, err)
		}
		break
	}
	if c.hooks.Acquired != nil {
		c.hooks.Acquired(ctx, Event{Backend: c.scheme, Name: s.name, Kind: kindName(req.Kind), Token: l.h.token, Wait: time.Since(began)})
	}
	return l, nil
}

// gaveUp makes the error of a wait that ended with ctx match ErrNotAcquired
// as well as ctx's error, so callers need one check.
func gaveUp(ctx context.Context, err error) error {
	if ctx.Err() == nil || errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotAcquired, err)
}

// reenter gives the owner a new lease on the hold it has, if it has one.
func (c *Client) reenter(ctx context.Context, k holdKey, req driver.Request) (*Lease, error) {
	c.mu.Lock()
	h := c.holds[k]
	c.mu.Unlock()
	if h == nil || h.checkDeadline() != nil { // none, or past its deadline: lost
		return nil, nil
	}
	if req.Kind == driver.Permit && req.Limit != h.limit { // as the stores that count holds refuse it
		return nil, fmt.Errorf("%w: the owner's permit is of a semaphore of %d, asked with %d", ErrLimitMismatch, h.limit, req.Limit)
	}
	if c.caps.Reentrant { // the store counts holds: count this one there too
		// which sets the store's expiry to req.TTL from when it is applied:
		// believe no more than that if it is shorter than the hold's.
		sent := time.Now()
		c.sched.lower(h, sent, req.TTL)
		g, err := c.drv.Acquire(ctx, req)
		if err != nil {
			return nil, err
		}
		if g.Acquired && g.Validity > 0 {
			c.sched.lower(h, sent, g.Validity)
		}
		if !g.Acquired { // the store says another owner has it: ours is gone
			c.lost(h, fmt.Errorf("%w: re-entry found another holder", ErrLeaseLost))
			return nil, nil
		}
		if g.Token != h.token { // the owner's hold in the store is a later one: ours is gone
			later := h.held()
			later.Token, later.Handle = g.Token, g.Handle
			_, _ = c.drv.Release(ctx, later, 1) // the count this attempt added
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

// sessionEnded reports whether a grant's session-loss channel is closed.
func sessionEnded(lost <-chan struct{}) bool {
	if lost == nil {
		return false
	}
	select {
	case <-lost:
		return true
	default:
		return false
	}
}

// allHolds is a count of holds no owner reaches: Release drops them all.
const allHolds = 1 << 30

// errStaleGrant is the cause of a grant that came too late to be returned.
var errStaleGrant = errors.New("grant confirmed too late to be safe")

// grant turns a granted request into a hold, registered with the scheduler.
// It refuses (releases, and returns errStaleGrant) a grant whose proven
// validity, counted from the send time of the request that proved it, leaves
// less than grantMargin: a process paused while the lock was handed to it,
// or a slow round trip, must not get a lease that is about to end or has
// ended, whatever the driver said.
//
// fresh says that req.Owner was made for this hold alone: its last Unlock
// then releases every count the store has under it.
func (c *Client) grant(ctx context.Context, k holdKey, req driver.Request, g driver.Grant, sent time.Time, renew, fresh bool) (*Lease, error) {
	if !g.Since.IsZero() { // the driver knows when the grant was proven
		sent = minTime(g.Since, time.Now()) // never a time still to come
	}
	validity := req.TTL
	if g.Validity > 0 && g.Validity < validity {
		validity = g.Validity
	}
	h := &hold{
		c: c, name: req.Name, owner: req.Owner, label: req.Label, ttl: req.TTL, kind: req.Kind, limit: req.Limit, renew: renew, fresh: fresh,
		token: g.Token, handle: g.Handle, lostCh: g.Lost, acquired: sent,
	}
	stale := ""
	if left := time.Until(sent.Add(validity)); left < grantMargin(req.TTL) {
		stale = fmt.Sprintf("%v left of its validity, %v needed", left.Round(time.Millisecond), grantMargin(req.TTL))
	} else if sessionEnded(g.Lost) {
		stale = "the store's session it was granted in has ended"
	}
	if stale != "" {
		c.log.Warn("dlock: grant came too late to be safe; released", "backend", c.scheme, "name", req.Name,
			"token", g.Token, "why", stale)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_, _ = c.drv.Release(rctx, h.held(), 1)
		return nil, fmt.Errorf("%w (%s)", errStaleGrant, stale)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.drv.Release(ctx, h.held(), 1)
		return nil, errors.Join(ErrClosed, err)
	}
	c.holds[k] = h
	l := h.newLease()
	c.mu.Unlock()
	c.sched.add(h, sent, validity)
	return l, nil
}
