package dlock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
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
	// per (name, owner): closed when the store release of the owner's
	// detached hold is done. A Lock by that owner waits for it, or the store
	// would grant it as a re-entry of the hold the release then deletes.
	freeing map[holdKey]*hold
}

type holdKey struct {
	name, owner string
	kind        driver.Kind // families and kinds are held apart
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
		holds: map[holdKey]*hold{}, freeing: map[holdKey]*hold{},
	}
	c.closing, c.cancel = context.WithCancel(context.Background())
	c.sched = keepalive.NewScheduler(d,
		func(e *keepalive.Entry) driver.Held { return e.Ref.(*hold).held() },
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

// enter takes the owner's turn on the name, waiting for another acquisition
// by the same owner to finish. With try, it gives up with ErrNotAcquired when
// that acquisition is blocked on another owner.
func (c *Client) enter(ctx context.Context, k holdKey, try bool) (*turn.Turn[holdKey], error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
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

// detach removes h from the client and the scheduler. It reports false if h
// had already ended (unlocked, lost or closed), so only one caller ends it.
func (c *Client) detach(h *hold) bool {
	c.mu.Lock()
	if h.detached {
		c.mu.Unlock()
		return false
	}
	c.detachLocked(h)
	c.mu.Unlock()
	c.sched.Remove(&h.ka)
	return true
}

// detachLocked removes h from the client. c.mu must be held. The caller
// then releases h in the store and calls freed.
func (c *Client) detachLocked(h *hold) {
	h.detached = true
	k := holdKey{h.name, h.owner, h.kind}
	c.freeing[k] = h
	if c.holds[k] == h {
		delete(c.holds, k)
	}
}

// freed reports that the store release of the detached hold h is done.
func (c *Client) freed(h *hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := holdKey{h.name, h.owner, h.kind}
	if c.freeing[k] == h {
		delete(c.freeing, k)
	}
	if h.freeing != nil {
		close(h.freeing)
	}
}

// awaitFreed waits until the store release of the owner's last detached
// hold of the name, if one is under way, is done.
func (c *Client) awaitFreed(ctx context.Context, k holdKey) error {
	c.mu.Lock()
	h := c.freeing[k]
	if h == nil {
		c.mu.Unlock()
		return nil
	}
	if h.freeing == nil { // made for the first who waits
		h.freeing = make(chan struct{})
	}
	ch := h.freeing
	c.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closing.Done():
		return ErrClosed
	}
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

// lost ends h with err (wrapping ErrLeaseLost), from the scheduler or a
// session watcher. It detaches h, marks its leases ended and records err on
// h in one step under c.mu, so an Unlock or Err racing it (in either order)
// reports the loss; then it runs the Lost hook and closes the leases' Done.
func (c *Client) lost(h *hold, err error) {
	err = c.wrap("lease", h.name, err)
	c.mu.Lock()
	if h.detached {
		c.mu.Unlock()
		return
	}
	h.lostErr.Store(&err)
	n := 1
	if c.caps.Reentrant {
		n = max(len(h.leases), 1)
	}
	ls := h.leases
	h.leases = nil
	for _, l := range ls {
		l.ended = true
	}
	c.detachLocked(h)
	c.mu.Unlock()
	c.sched.Remove(&h.ka)
	c.log.Warn("dlock: lease lost", "backend", c.scheme, "name", h.name, "token", h.token, "err", err)
	if c.hooks.Lost != nil {
		c.hooks.Lost(context.Background(), h.event(err))
	}
	for _, l := range ls {
		l.cancel(err)
	}
	// Close waits for the releases below once it has set closed: count this
	// one before then, or release it on this goroutine (as when the hook
	// above closed the client).
	c.mu.Lock()
	async := !c.closed
	if async {
		c.cleanup.Add(1)
	}
	c.mu.Unlock()
	release := func() { // let the driver free the hold's state; the store refuses it if it changed hands
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.drv.Release(ctx, h.held(), n)
		c.freed(h)
	}
	if !async {
		release()
		return
	}
	go func() {
		defer c.cleanup.Done()
		release()
	}()
}
