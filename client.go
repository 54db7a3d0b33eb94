package dlock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/core"
	"github.com/dlock/dlock/internal/keepalive"
	"github.com/dlock/dlock/internal/turn"
)

// Client is a connection to one lock store. It is safe for concurrent use.
// Every lease it grants is renewed by one scheduler per client, and Close
// releases them all.
type Client struct {
	drv    driver.Driver
	scheme string
	label  string // the default holder label, "host:pid"
	caps   driver.Caps
	log    *slog.Logger
	hooks  Hooks
	sched  *keepalive.Scheduler

	// closing is cancelled by Close, which wakes every waiter.
	closing context.Context
	cancel  context.CancelFunc

	cleanup sync.WaitGroup // best-effort releases of lost holds

	mu     sync.Mutex
	closed bool
	holds  map[holdKey]*hold // per (name, owner): the live hold, which a re-entry shares
	// per (name, owner): one acquisition at a time, so a second Lock by the
	// owner re-enters the hold the first one got
	turns turn.Set[holdKey]
	// per name: local waiters in arrival order, so a release wakes one
	// waiter per process
	waiters turn.Set[string]
	// per (name, owner): the store release under way of the owner's
	// detached hold. A Lock by that owner waits for it, or the store would
	// grant it as a re-entry of the hold the release then deletes.
	releases core.Releases[holdKey]
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
		drv: d, scheme: scheme, label: defaultLabel(), caps: caps, log: o.logger, hooks: o.hooks,
		holds: map[holdKey]*hold{},
	}
	c.closing, c.cancel = context.WithCancel(context.Background())
	c.sched = keepalive.NewScheduler(d,
		heldOf,
		func(e *keepalive.Entry, err error) { c.lost(e.Ref.(*hold), err) },
		func(e *keepalive.Entry, latency time.Duration, err error) { c.renewed(e.Ref.(*hold), latency, err) })
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
	for _, h := range c.holds {
		holds = append(holds, h)
	}
	c.mu.Unlock()
	c.cancel()
	c.sched.Stop()
	c.cleanup.Wait()

	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range holds {
		if !c.detach(h) {
			continue
		}
		err := c.drv.Release(ctx, h.held(), h.storeHolds())
		c.freed(h)
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

// renewed reports one hold's renewal result, from the scheduler.
func (c *Client) renewed(h *hold, latency time.Duration, err error) {
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		c.log.Debug("dlock: renewal failed; retrying", "backend", c.scheme, "name", h.name, "err", err)
	}
	if c.hooks.Renewed != nil {
		e := h.event(err)
		e.Held, e.Latency = 0, latency
		c.hooks.Renewed(context.Background(), e)
	}
}
