package dlock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
)

// Client is a connection to one lock store. It is safe for concurrent use.
// Every lease it grants is renewed by one scheduler per client, and Close
// releases them all.
type Client struct {
	drv    driver.Driver
	scheme string
	caps   driver.Caps
	log    *slog.Logger
	hooks  Hooks
	sched  *scheduler

	// closing is cancelled by Close, which wakes every waiter.
	closing context.Context
	cancel  context.CancelFunc

	cleanup sync.WaitGroup // best-effort releases of lost holds

	mu      sync.Mutex
	closed  bool
	entries map[holdKey]*entry    // per (name, owner): re-entry and its hold
	queues  map[string]*waitQueue // per name: local waiters in arrival order
}

type holdKey struct{ name, owner string }

// entry serialises the acquisitions of one owner on one name, so a second
// Lock by the same owner re-enters the hold the first one got.
type entry struct {
	sem     chan struct{} // capacity 1: taken while acquiring
	hold    *hold         // the live hold, or nil
	waiting bool          // the acquiring call is blocked on another owner
	refs    int
}

// New makes a Client over an opened driver. Backend packages use it in their
// own Open functions; scheme names the backend in errors.
func New(d driver.Driver, scheme string, opts ...ClientOption) *Client {
	o := clientOptions{logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	caps := d.Caps()
	if caps.MaxNameLen <= 0 {
		caps.MaxNameLen = defaultMaxNameLen
	}
	c := &Client{
		drv: d, scheme: scheme, caps: caps, log: o.logger, hooks: o.hooks,
		entries: map[holdKey]*entry{}, queues: map[string]*waitQueue{},
	}
	c.closing, c.cancel = context.WithCancel(context.Background())
	c.sched = newScheduler(c)
	return c
}

// Backend returns the URL scheme of the client's backend.
func (c *Client) Backend() string { return c.scheme }

// Mutex returns a mutual-exclusion lock named name. Making a Mutex does not
// touch the store; invalid arguments are reported by its methods. A Mutex
// is safe for concurrent use, and like sync.Mutex its Lock calls exclude
// each other: goroutines sharing one Mutex take turns. Re-entry is only
// what a caller asks for: through a ctx carrying a live lease of the lock
// (Do's, or ContextWithLease), or by sharing an owner id (WithOwner).
func (c *Client) Mutex(name string, opts ...Option) *Mutex {
	o := mutexOptions{ttl: DefaultTTL}
	for _, opt := range opts {
		opt(&o)
	}
	m := &Mutex{c: c, name: name, opts: o}
	m.err = c.validate(name, o)
	return m
}

// Inspect describes the lock named name: its holder's owner id, hold count,
// fencing token and time left.
func (c *Client) Inspect(ctx context.Context, name string) (Info, error) {
	if ctx == nil {
		return Info{}, c.wrap("inspect", name, ErrNilContext)
	}
	if err := c.validateName(name); err != nil {
		return Info{}, c.wrap("inspect", name, err)
	}
	if c.isClosed() {
		return Info{}, c.wrap("inspect", name, ErrClosed)
	}
	di, err := c.drv.Inspect(ctx, name)
	if err != nil {
		return Info{}, c.wrap("inspect", name, err)
	}
	return Info(di), nil
}

// ForceUnlock deletes the lock named name whoever holds it. It is for
// operators clearing a lock by hand; the holder finds out at its next
// renewal. Backends that cannot do it return ErrUnsupported.
func (c *Client) ForceUnlock(ctx context.Context, name string) error {
	if ctx == nil {
		return c.wrap("force-unlock", name, ErrNilContext)
	}
	if err := c.validateName(name); err != nil {
		return c.wrap("force-unlock", name, err)
	}
	fr, ok := c.drv.(driver.ForceReleaser)
	if !ok {
		return c.wrap("force-unlock", name, ErrUnsupported)
	}
	return c.wrap("force-unlock", name, fr.ForceRelease(ctx, name))
}

// Migrate creates what the backend's store needs (the SQL backends' tables)
// if it is missing; backends that need nothing return ErrUnsupported.
func (c *Client) Migrate(ctx context.Context) error {
	if ctx == nil {
		return c.wrap("migrate", "", ErrNilContext)
	}
	m, ok := c.drv.(driver.Migrator)
	if !ok {
		return c.wrap("migrate", "", ErrUnsupported)
	}
	return c.wrap("migrate", "", m.Migrate(ctx))
}

// As exposes the backend's own types: it sets target, a pointer to a
// backend-specific type its package documents, and reports whether it could.
func (c *Client) As(target any) bool { return c.drv.As(target) }

// Close releases every lease the client holds (their Err then wraps
// ErrClosed), stops renewals, wakes waiters with ErrClosed and closes the
// backend's connections. It returns the first error met; calling it again
// does nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	var holds []*hold
	for _, e := range c.entries {
		if e.hold != nil {
			holds = append(holds, e.hold)
		}
	}
	c.mu.Unlock()
	c.cancel()
	c.sched.stop()
	c.cleanup.Wait()

	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range holds {
		if !c.detach(h) {
			continue
		}
		_, err := c.drv.Release(ctx, h.held(), h.storeHolds())
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			errs = append(errs, c.wrap("close", h.name, err))
		}
		h.end(ErrClosed)
	}
	if err := c.drv.Close(); err != nil {
		errs = append(errs, c.wrap("close", "", err))
	}
	return errors.Join(errs...)
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// enter takes the entry of (name, owner), waiting for another acquisition by
// the same owner to finish. With try, it gives up with ErrNotAcquired when
// that acquisition is blocked on another owner.
func (c *Client) enter(ctx context.Context, k holdKey, try bool) (*entry, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	e := c.entries[k]
	if e == nil {
		e = &entry{sem: make(chan struct{}, 1)}
		c.entries[k] = e
	}
	e.refs++
	c.mu.Unlock()
	for {
		select {
		case e.sem <- struct{}{}:
			return e, nil
		default:
		}
		c.mu.Lock()
		blocked := e.waiting
		c.mu.Unlock()
		if try && blocked {
			c.unref(k, e)
			return nil, ErrNotAcquired
		}
		select {
		case e.sem <- struct{}{}:
			return e, nil
		case <-ctx.Done():
			c.unref(k, e)
			return nil, context.Cause(ctx)
		case <-c.closing.Done():
			c.unref(k, e)
			return nil, ErrClosed
		}
	}
}

// leave gives back the entry taken by enter.
func (c *Client) leave(k holdKey, e *entry) {
	<-e.sem
	c.unref(k, e)
}

func (c *Client) unref(k holdKey, e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	if e.refs == 0 && e.hold == nil && c.entries[k] == e {
		delete(c.entries, k)
	}
}

func (c *Client) setWaiting(e *entry, w bool) {
	c.mu.Lock()
	e.waiting = w
	c.mu.Unlock()
}

// detach removes h from the client and the scheduler. It reports false if h
// had already ended (unlocked, lost or closed), so only one caller ends it.
func (c *Client) detach(h *hold) bool {
	c.mu.Lock()
	if h.detached {
		c.mu.Unlock()
		return false
	}
	h.detached = true
	k := holdKey{h.name, h.owner}
	if e := c.entries[k]; e != nil && e.hold == h {
		e.hold = nil
		if e.refs == 0 {
			delete(c.entries, k)
		}
	}
	c.mu.Unlock()
	c.sched.remove(h)
	return true
}

// lost ends h with err (wrapping ErrLeaseLost), from the scheduler or a
// session watcher.
func (c *Client) lost(h *hold, err error) {
	if !c.detach(h) {
		return
	}
	err = c.wrap("lease", h.name, err)
	c.log.Warn("dlock: lease lost", "backend", c.scheme, "name", h.name, "token", h.token, "err", err)
	if c.hooks.Lost != nil {
		c.hooks.Lost(context.Background(), Event{Backend: c.scheme, Name: h.name, Token: h.token, Held: time.Since(h.acquired), Err: err})
	}
	n := h.storeHolds()
	h.end(err)
	c.cleanup.Add(1)
	go func() { // let the driver free the hold's state; the store refuses it if it changed hands
		defer c.cleanup.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = c.drv.Release(ctx, h.held(), n)
	}()
}
