package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/core"
)

// ErrNoLeader is returned by Election.Leader when the election has no leader.
var ErrNoLeader = errors.New("dlock: no leader")

// Election is a leader election, made by Client.Election: candidates
// Campaign, one of them leads at a time for a Term, and anyone can read the
// Leader or Observe its changes. Its methods are safe for concurrent use.
//
// On etcd and ZooKeeper an election has the layout of the store's own
// recipe (etcd's concurrency.Election and `etcdctl elect`; Curator's
// LeaderLatch), so their candidates and dlock's elect one leader. Elsewhere
// it is a lock on the election's name: a term is a hold of that lock, and
// the leader's value is kept as the hold's label (WithLabel is then
// ignored), so it must be a valid label (at most 256 bytes of UTF-8, no NUL)
// and is empty where the store keeps no labels (the SQL row and session
// locks); Proclaim returns ErrUnsupported there. On every backend an
// election and a Mutex of the same name are one thing in the store: do not
// use one name for both. Backends that cannot hold an election safely
// (Memcached, which may evict keys) report ErrUnsupported from every method.
type Election struct {
	c    *Client
	name string
	opts mutexOptions
	el   driver.Elector // nil: the portable election
	err  error
}

// Election returns the leader election named name. Making it does not touch
// the store; invalid arguments, and a backend that cannot hold elections
// (ErrUnsupported, with the reason), are reported by its methods. The
// options are those of a Mutex: WithTTL sets how long a dead leader keeps
// the lead, WithLabel the leader's label where the store keeps one apart
// from its value, WithoutRenewal makes terms end at their TTL. WithOwner
// is ignored: every Campaign is a candidate of its own.
func (c *Client) Election(name string, opts ...Option) *Election {
	o := mutexOptions{Opts: core.Opts{TTL: DefaultTTL}}
	for _, opt := range opts {
		opt(&o)
	}
	e := &Election{c: c, name: name, opts: o}
	e.el, _ = c.e.Driver().(driver.Elector)
	if no := c.e.Caps().NoElection; no != "" {
		e.err = fmt.Errorf("%w: %s", ErrUnsupported, no)
	} else {
		e.err = validate(c.e, name, o)
	}
	return e
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// Err reports what making the Election found wrong, which its methods also
// return: invalid arguments, or ErrUnsupported with the reason when the
// backend cannot hold elections; nil when it is usable. Check it at
// start-up to fail early.
func (e *Election) Err() error { return e.c.e.Wrap("election", e.name, e.err) }

// Leader describes the leader of an election.
type Leader struct {
	Value string // the value the leader campaigned with or proclaimed
	Label string // the leader's holder label, where the store keeps one apart from the value
	Term  uint64 // the leader's term: strictly greater than every earlier term
}

// Term is one candidate's lead, from Campaign until Resign, Client.Close or
// its loss, which happens exactly as a Lease's: its watchdog renewal
// failing, loss detected before expiry, or the store's session ending. Its
// methods are safe for concurrent use.
type Term struct {
	e *Election
	l *Lease

	proclaiming sync.Mutex // one Proclaim at a time, so value is the last one applied
	mu          sync.Mutex
	value       string
}

// Campaign blocks until this candidate leads, proposing value, and returns
// its term. ctx bounds the wait only: the term lasts until Resign,
// Client.Close or its loss. When ctx ends first, Campaign returns an error
// matching ErrNotAcquired and ctx's error, and leaves nothing behind.
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	c := e.c
	if ctx == nil {
		return nil, c.e.Wrap("campaign", e.name, ErrNilContext)
	}
	if e.err != nil {
		return nil, c.e.Wrap("campaign", e.name, e.err)
	}
	if e.el == nil { // portable: a lock whose label is the value
		o := e.opts
		o.Label = value
		o.Owner, o.ownerSet, o.Fresh = driver.ElectionOwnerPrefix+NewOwnerID(), true, true // every Campaign is a candidate of its own, marked for List
		if err := validate(c.e, e.name, o); err != nil {
			return nil, c.e.Wrap("campaign", e.name, fmt.Errorf("value: %w", err))
		}
		l, err := (&Mutex{c: c, name: e.name, opts: o}).Lock(ctx)
		if de := (*Error)(nil); errors.As(err, &de) {
			de.Op = "campaign"
		}
		if err != nil {
			return nil, err
		}
		return &Term{e: e, l: l, value: value}, nil
	}
	var l *Lease
	_, err := c.e.Campaign(ctx, e.name, e.opts.Opts, func(ctx context.Context, req driver.Request) (driver.Grant, error) {
		return e.el.Campaign(ctx, req, value)
	}, alloc(c, &l))
	if err != nil {
		return nil, c.e.Wrap("campaign", e.name, err)
	}
	return &Term{e: e, l: l, value: value}, nil
}

// A nil *Term, which a failed Campaign returns, is safe to call: it holds
// nothing, as a nil *Lease.

// Token returns the term: strictly greater than every earlier term of the
// election (the fencing token of the term's hold). Pass it to what the
// leader writes to, so it can refuse a deposed leader's writes.
func (t *Term) Token() uint64 { return t.lease().Token() }

// Value returns the value the term campaigned with or last proclaimed.
func (t *Term) Value() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.value
}

// Lease returns the lease that holds the term, for TimeLeft, Extend and As.
func (t *Term) Lease() *Lease { return t.lease() }

// lease is t's lease, nil for a nil *Term.
func (t *Term) lease() *Lease {
	if t == nil {
		return nil
	}
	return t.l
}

// Done is closed when the term ends: by Resign, Client.Close or its loss.
func (t *Term) Done() <-chan struct{} { return t.lease().Done() }

// Err returns nil while the term lasts and after Resign; after a loss, an
// error wrapping ErrLeaseLost; after Client.Close, one wrapping ErrClosed.
func (t *Term) Err() error { return t.lease().Err() }

// Resign gives up the lead, so that another candidate can take it at once.
// It returns an error wrapping ErrLeaseLost if the term had been lost.
func (t *Term) Resign(ctx context.Context) error { return t.lease().Unlock(ctx) }

// Proclaim changes the leader's value without giving up the lead. It
// returns an error wrapping ErrLeaseLost if the term was lost (the term
// then ends), and ErrUnsupported on the portable election, where the value
// is fixed for the term (resign and campaign again to change it).
func (t *Term) Proclaim(ctx context.Context, value string) error {
	if t == nil || t.l.none() {
		return nilLease("proclaim")
	}
	e, c := t.e, t.e.c
	if ctx == nil {
		return c.e.Wrap("proclaim", e.name, ErrNilContext)
	}
	if e.el == nil {
		return c.e.Wrap("proclaim", e.name, fmt.Errorf("%w: the value is the hold's label, fixed for the term", ErrUnsupported))
	}
	if err := t.l.Err(); err != nil {
		return err
	}
	if t.l.l.Context().Err() != nil {
		return c.e.Wrap("proclaim", e.name, ErrNotHeld)
	}
	t.proclaiming.Lock()
	defer t.proclaiming.Unlock()
	err := e.el.Proclaim(ctx, t.l.hold().Held(), value)
	if errors.Is(err, ErrLeaseLost) {
		c.e.Lost(t.l.hold(), err)
		return t.l.Err()
	}
	if err != nil {
		return c.e.Wrap("proclaim", e.name, err)
	}
	t.mu.Lock()
	t.value = value
	t.mu.Unlock()
	return nil
}

// Lead campaigns with value and, once leading, runs fn, then resigns. The
// ctx passed to fn derives from ctx and is cancelled when the term is lost,
// with the loss as its cause (context.Cause wraps ErrLeaseLost): fn should
// watch it. Lead returns fn's error, joined with a loss or resign error if
// there was one. ctx bounds the campaign too: a Lead that never leads
// returns when ctx ends, with an error matching ErrNotAcquired. A nil fn
// is an error wrapping ErrInvalidConfig, and nothing is campaigned for.
func (e *Election) Lead(ctx context.Context, value string, fn func(ctx context.Context, t *Term) error) error {
	if fn == nil {
		return e.c.e.Wrap("lead", e.name, fmt.Errorf("%w: the function to run is nil", ErrInvalidConfig))
	}
	t, err := e.Campaign(ctx, value)
	if err != nil {
		return err
	}
	return whileHeld(ctx, ctx, t.l.l.Context(), t.Resign, func(ctx context.Context) error { return fn(ctx, t) })
}
