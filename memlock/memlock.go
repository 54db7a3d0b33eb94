// Package memlock is the in-process dlock backend, for unit tests that need
// no server. Import it for its side effect and open "mem://":
//
//	import _ "github.com/dlock/dlock/memlock"
//	c, err := dlock.Open(ctx, "mem://")
//
// It behaves like a real store: leases expire at their TTL unless renewed,
// fencing tokens come from a per-name counter that outlives the lock, hold
// counts are kept per owner in the store (re-entry), and a release wakes
// waiters with a notification while an expiry does not (as with Redis).
//
// "mem://" opens a new private store; "mem://NAME" opens the store NAME,
// shared by every client of this process that opens the same URL, so several
// clients can contend as separate processes would. A named store lives while
// a client of it is open. Nothing is shared across processes.
//
// Read-write locks and semaphores (Client.RWMutex, Client.Semaphore) are
// held here too, each family of a name apart with its own token counter.
// Refused readers and writers keep their place in arrival order with a
// record that lives for two seconds at most (or their TTL if shorter)
// unless their next attempt renews it, so a waiting writer keeps later
// readers out and neither kind starves; a semaphore's permit count is
// stored with it while it has holders.
//
// Guarantees: mutual exclusion, expiry and tokens are exact within the
// process. There is no persistence: nothing survives the process.
//
// TTLs are whole milliseconds, from 6 ms (the margin every grant needs) up
// to ten years, as on the stores; a TTL outside is refused with
// ErrInvalidTTL when the lock is made.
//
// Per-name state that stays: each name's token counter (a map entry of the
// name plus 8 bytes, per family used) outlives its locks for the life of
// the store, so that tokens never go backwards.
package memlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// Scheme is the URL scheme of the backend.
const Scheme = "mem"

func init() { dlock.Register(Scheme, driver.OpenerFunc(openURL)) }

// errCut is returned by every call of a Driver cut by a test: the failure
// is uncertain, as a network error would be.
var errCut = errors.New("memlock: connection cut")

// named holds the stores opened by name; they are the backend's connection
// targets, like servers, and live while a client uses them.
var named struct {
	mu     sync.Mutex
	stores map[string]*store
}

func openURL(_ context.Context, u *url.URL) (driver.Driver, error) {
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("memlock: %w: want mem:// or mem://NAME", dlock.ErrInvalidURL)
	}
	if u.User != nil { // an in-process store has no users: a URL meant for another store?
		return nil, fmt.Errorf("memlock: %w: mem:// takes no user or password; want mem:// or mem://NAME", dlock.ErrInvalidURL)
	}
	if u.Host == "" {
		return &Driver{s: newStore("")}, nil
	}
	named.mu.Lock()
	defer named.mu.Unlock()
	s := named.stores[u.Host]
	if s == nil {
		if named.stores == nil {
			named.stores = map[string]*store{}
		}
		s = newStore(u.Host)
		named.stores[u.Host] = s
	}
	s.refs++
	return &Driver{s: s}, nil
}

// Open returns a client over a new private in-process store.
func Open(opts ...dlock.ClientOption) *dlock.Client {
	return dlock.New(&Driver{s: newStore("")}, Scheme, opts...)
}

// Driver is the memlock driver, reached with Client.As.
type Driver struct {
	s      *store
	closed atomic.Bool
	cut    atomic.Bool // set by tests (export_test.go): every call fails
}

func (d *Driver) check() error {
	if d.closed.Load() {
		return dlock.ErrClosed
	}
	if d.cut.Load() {
		return errCut
	}
	return nil
}

// Caps implements driver.Driver.
func (d *Driver) Caps() driver.Caps {
	return driver.Caps{MaxNameLen: 1024, MinTTL: time.Millisecond, TTLResolution: time.Millisecond, Reentrant: true,
		Kinds: []driver.Kind{driver.Shared, driver.Write, driver.Permit}}
}

// Acquire implements driver.Driver.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := d.check(); err != nil {
		return driver.Grant{}, err
	}
	// An ended ctx fails the attempt before it takes anything: dlock drops
	// the grant of a failed Acquire, so one taken anyway would be held by
	// nobody until its TTL.
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	if req.Kind != driver.Exclusive {
		return d.s.acquireKind(req)
	}
	return d.s.acquire(req), nil
}

// Renew implements driver.Driver.
func (d *Driver) Renew(_ context.Context, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
	if err := d.check(); err != nil {
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	d.s.renew(batch, res)
	return res
}

// Release implements driver.Driver.
func (d *Driver) Release(_ context.Context, h driver.Held, count int) error {
	if err := d.check(); err != nil {
		return err
	}
	if h.Kind != driver.Exclusive {
		_, err := d.s.releaseKind(h, count)
		return err
	}
	_, err := d.s.release(h.Name, h.Owner, h.Token, count)
	return err
}

// InspectKind implements driver.KindInspector.
func (d *Driver) InspectKind(_ context.Context, name string, kind driver.Kind) (driver.Info, error) {
	if err := d.check(); err != nil {
		return driver.Info{}, err
	}
	return d.s.inspectKind(name, kind), nil
}

// ForceRelease implements driver.ForceReleaser.
func (d *Driver) ForceRelease(_ context.Context, name string, token uint64) error {
	if err := d.check(); err != nil {
		return err
	}
	d.s.forceRelease(name, token)
	return nil
}

// ForceReleaseKind implements driver.KindForceReleaser.
func (d *Driver) ForceReleaseKind(_ context.Context, name string, kind driver.Kind, tokens []uint64) error {
	if err := d.check(); err != nil {
		return err
	}
	d.s.forceReleaseKind(name, kind, tokens)
	return nil
}

// Inspect implements driver.Driver.
func (d *Driver) Inspect(_ context.Context, name string) (driver.Info, error) {
	if err := d.check(); err != nil {
		return driver.Info{}, err
	}
	return d.s.inspect(name), nil
}

// Subscribe implements driver.Notifier.
func (d *Driver) Subscribe(_ context.Context, name string) (driver.Subscription, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.s.subscribe(name), nil
}

// Close implements driver.Driver. It releases the driver's reference to a
// named store; holds stay in the store until they expire, like a real one.
func (d *Driver) Close() error {
	if d.closed.Swap(true) || d.s.name == "" {
		return nil
	}
	named.mu.Lock()
	defer named.mu.Unlock()
	if d.s.refs--; d.s.refs == 0 && named.stores[d.s.name] == d.s {
		delete(named.stores, d.s.name)
	}
	return nil
}

// As implements driver.Driver: target may be a **Driver.
func (d *Driver) As(target any) bool {
	if p, ok := target.(**Driver); ok {
		*p = d
		return true
	}
	return false
}
