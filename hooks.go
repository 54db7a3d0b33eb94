package dlock

import (
	"context"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/core"
)

// Event describes one lock event, for hooks.
type Event struct {
	Backend string        // the backend's URL scheme
	Name    string        // the lock name
	Kind    string        // the kind of hold: "exclusive" (a Mutex), "shared" or "write" (an RWMutex), "permit" (a Semaphore)
	Token   uint64        // the lease's fencing token; 0 when refused
	Wait    time.Duration // Acquired, Refused: how long the call waited
	Held    time.Duration // Released, Lost: how long the hold lasted
	Latency time.Duration // Renewed: the renewal's round trip
	Err     error         // Refused: why; Renewed: a failed renewal's error; Lost: the cause
}

// Call describes a Lock, TryLock, Unlock or Extend call, for Hooks.Call.
type Call struct {
	Op      string // "lock", "trylock", "unlock" or "extend"
	Backend string // the backend's URL scheme
	Name    string // the lock name
	Kind    string // the kind of hold: "exclusive" (a Mutex), "shared" or "write" (an RWMutex), "permit" (a Semaphore)
	Token   uint64 // Unlock, Extend: the lease's fencing token; 0 for Lock and TryLock
}

// Hooks are called on lock events, for metrics, traces and logs. Each field
// may be nil. Hooks must return quickly: they run on the goroutine that saw
// the event. The ctx of Acquired and Refused is the Lock call's, that of
// Released the Unlock call's; Renewed and Lost get a background context
// (they come from the client's scheduler). A panic in Acquired, or in the
// end of a Lock's Call hook, goes on to the caller after the hold just
// granted is given back.
type Hooks struct {
	// Acquired: a Lock or TryLock was granted a new hold (not a re-entry).
	Acquired func(ctx context.Context, e Event)
	// Refused: a TryLock found the lock held, or a Lock's wait ended
	// without it (contention).
	Refused func(ctx context.Context, e Event)
	// Released: a lease was unlocked.
	Released func(ctx context.Context, e Event)
	// Renewed: one hold's renewal came back, confirmed or failed (e.Err).
	Renewed func(ctx context.Context, e Event)
	// Lost: a lease was lost; e.Err wraps ErrLeaseLost. It runs after the
	// lease's Done has closed (and Do's ctx was cancelled), so that a slow
	// hook does not hold them back past the store's expiry. It may call
	// Client.Close.
	Lost func(ctx context.Context, e Event)
	// Call: a Lock, TryLock, Unlock or Extend call begins (for traces).
	// The ctx it returns is the one the call goes on with, and is passed to
	// the Acquired, Refused and Released hooks the call runs; end is called
	// when the call returns, with the fencing token it got or had (0 if
	// none) and its error. Not called for a nil ctx.
	Call func(ctx context.Context, c Call) (_ context.Context, end func(token uint64, err error))
}

// observer turns the engine's events into the client's hooks and its
// errors into *Error: it is the root package's side of core.Observer.
type observer struct {
	scheme string
	hooks  Hooks
}

var _ core.Observer = (*observer)(nil)

// event is the one constructor of hook events: the event about a hold of
// kind on the lock name with token (0 when refused), after a wait of wait
// (0 when not a Lock's), with err.
func (o *observer) event(name string, kind Kind, token uint64, wait time.Duration, err error) Event {
	return Event{Backend: o.scheme, Name: name, Kind: kind.String(), Token: token, Wait: wait, Err: err}
}

// holdEvent is the hook event about h, lasting since it was acquired.
func (o *observer) holdEvent(h *core.Hold, err error) Event {
	e := o.event(h.Name(), h.Kind(), h.Token(), 0, err)
	e.Held = time.Since(h.Acquired())
	return e
}

func (o *observer) Acquired(ctx context.Context, h *core.Hold, wait time.Duration) {
	if o.hooks.Acquired != nil {
		o.hooks.Acquired(ctx, o.event(h.Name(), h.Kind(), h.Token(), wait, nil))
	}
}

func (o *observer) Refused(ctx context.Context, s core.Spec, wait time.Duration, err error) {
	if o.hooks.Refused != nil {
		o.hooks.Refused(ctx, o.event(s.Name, s.Kind, 0, wait, err))
	}
}

func (o *observer) Released(ctx context.Context, h *core.Hold) {
	if o.hooks.Released != nil {
		o.hooks.Released(ctx, o.holdEvent(h, nil))
	}
}

func (o *observer) Renewed(h *core.Hold, latency time.Duration, err error) {
	if o.hooks.Renewed != nil {
		e := o.holdEvent(h, err)
		e.Held, e.Latency = 0, latency
		o.hooks.Renewed(context.Background(), e)
	}
}

func (o *observer) Lost(ctx context.Context, h *core.Hold, err error) {
	if o.hooks.Lost != nil {
		o.hooks.Lost(ctx, o.holdEvent(h, err))
	}
}

// lock is the Lock, TryLock, RLock, Acquire... of every kind: the engine's
// acquire path, inside the Call hook.
func lock(ctx context.Context, c *Client, op string, s core.Spec, o mutexOptions, try bool) (*Lease, error) {
	ctx, end := c.obs.call(ctx, op, s.Name, s.Kind, 0)
	var l *Lease
	defer func() {
		// A hook that panics once the hold is made (Acquired, or the Call
		// hook's end) takes the lease with it, unreturned: give the hold
		// back, or a caller that recovers (as net/http does) leaves it held
		// and renewed until Close (an adversary pass).
		if r := recover(); r != nil {
			if l != nil {
				_ = l.l.Unlock(context.WithoutCancel(ctx))
			}
			panic(r)
		}
	}()
	_, err := c.e.Acquire(ctx, op, s, o.Opts, try, alloc(c, &l))
	var token uint64
	if err == nil { // the engine made l with alloc
		token = l.hold().Token()
	}
	end(token, err)
	return l, err
}

// alloc returns an engine lease allocator (for core.Engine.Acquire) that makes
// the engine's lease inside a Lease of c, which it stores in *out: one
// allocation for both.
func alloc(c *Client, out **Lease) func() *core.Lease {
	return func() *core.Lease {
		*out = &Lease{c: c, born: int64(time.Since(bornEpoch))}
		return &(*out).l
	}
}

// unlock is Lease.Unlock: the engine's, inside the Call hook.
func unlock(ctx context.Context, l *Lease) (err error) {
	h := l.l.Hold()
	ctx, end := l.c.obs.call(ctx, "unlock", h.Name(), h.Kind(), h.Token())
	defer func() { end(h.Token(), err) }()
	return l.l.Unlock(ctx)
}

// extend is Lease.Extend: the engine's, inside the Call hook.
func extend(ctx context.Context, l *Lease, ttl time.Duration) (err error) {
	h := l.l.Hold()
	ctx, end := l.c.obs.call(ctx, "extend", h.Name(), h.Kind(), h.Token())
	defer func() { end(h.Token(), err) }()
	return l.l.Extend(ctx, ttl)
}

// call runs the Call hook, if there is one, for a call beginning with ctx.
// It returns the ctx the call goes on with and the function to call with its
// outcome (the granted token, or 0, and the call's error). A nil ctx is
// left alone: the call itself refuses it.
func (o *observer) call(ctx context.Context, op, name string, kind driver.Kind, token uint64) (context.Context, func(token uint64, err error)) {
	if o.hooks.Call == nil || ctx == nil {
		return ctx, func(uint64, error) {}
	}
	ctx, end := o.hooks.Call(ctx, Call{Op: op, Backend: o.scheme, Name: name, Kind: kind.String(), Token: token})
	if end == nil {
		end = func(uint64, error) {}
	}
	return ctx, end
}

// wrap is the error of operation op on the lock name: an *Error naming the
// backend, or nil for nil.
func (o *observer) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Backend: o.scheme, Name: name, Err: err}
}
