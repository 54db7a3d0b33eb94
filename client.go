package dlock

import (
	"context"
	"log/slog"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/core"
)

// Client is a connection to one lock store. It is safe for concurrent use.
// Every lease it grants is renewed by one scheduler per client, and Close
// releases them all. It is the user's face of an engine (internal/core),
// which holds the locks.
type Client struct {
	e   *core.Engine
	obs *observer
}

// New makes a Client over an opened driver. Backend packages use it in their
// own Open functions; scheme names the backend in errors.
func New(d driver.Driver, scheme string, opts ...ClientOption) *Client {
	o := clientOptions{logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	obs := &observer{scheme: scheme, hooks: o.hooks}
	e := core.NewEngine(d, core.Config{Scheme: scheme, Label: defaultLabel(), Log: o.logger, Observer: obs, Wrap: obs.wrap})
	return &Client{e: e, obs: obs}
}

// Backend returns the URL scheme of the client's backend.
func (c *Client) Backend() string { return c.obs.scheme }

// Mutex returns a mutual-exclusion lock named name. Making a Mutex does not
// touch the store; invalid arguments are reported by its methods. A Mutex
// is safe for concurrent use, and like sync.Mutex its Lock calls exclude
// each other: goroutines sharing one Mutex take turns. Re-entry is only
// what a caller asks for: through a ctx carrying a live lease of the lock
// (Do's, or ContextWithLease), or by sharing an owner id (WithOwner).
func (c *Client) Mutex(name string, opts ...Option) *Mutex {
	o := mutexOptions{Opts: core.Opts{TTL: DefaultTTL}}
	for _, opt := range opts {
		opt(&o)
	}
	o.Invalid = validate(c.e, name, o)
	return &Mutex{c: c, name: name, opts: o}
}

// Inspect describes the lock named name: its holder's owner id, hold count,
// fencing token and time left. Where name is a portable election's
// (Client.Election on a store without an election layout of its own), it
// says so: Election is set, Label is the leader's value and Token its term.
func (c *Client) Inspect(ctx context.Context, name string) (Info, error) {
	di, err := c.e.Inspect(ctx, name, driver.Exclusive, "")
	if err == nil && di.Held && driver.IsElectionOwner(di.Owner) {
		di.Election = true
	}
	return Info(di), err
}

// ForceUnlock deletes the lock named name whoever holds it; with tokens,
// only if its holder's fencing token is one of them (Info.Token, as Inspect
// showed it), so that an operator never drops a holder granted after it
// looked. It is for operators clearing a lock by hand; the holder finds out
// at its next renewal. Backends that cannot do it return ErrUnsupported.
// It releases the Mutex of that name only: RWMutex.ForceUnlock and
// Semaphore.ForceUnlock release the other kinds.
func (c *Client) ForceUnlock(ctx context.Context, name string, tokens ...uint64) error {
	return c.e.ForceRelease(ctx, name, driver.Exclusive, "", tokens)
}

// Migrate creates what the backend's store needs (the SQL backends' tables)
// if it is missing; backends that need nothing return ErrUnsupported.
func (c *Client) Migrate(ctx context.Context) error {
	if ctx == nil {
		return c.e.Wrap("migrate", "", ErrNilContext)
	}
	m, ok := c.e.Driver().(driver.Migrator)
	if !ok {
		return c.e.Wrap("migrate", "", ErrUnsupported)
	}
	return c.e.Wrap("migrate", "", m.Migrate(ctx))
}

// As exposes the backend's own types: it sets target, a pointer to a
// backend-specific type its package documents, and reports whether it could.
func (c *Client) As(target any) bool { return c.e.Driver().As(target) }

// Close releases every lease the client holds (their Err then wraps
// ErrClosed), stops renewals, wakes waiters with ErrClosed and closes the
// backend's connections. It returns the first error met; calling it again
// does nothing.
func (c *Client) Close() error { return c.e.Close() }
