package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock/driver"
)

// fakeDriver is an in-package driver, as database/sql's fakedb is: a small
// in-memory lock store whose calls a test can count, cut off or replace, to
// test the portable layer's own logic (waiting, the grant guard, renewal and
// loss) apart from any real store.
type fakeDriver struct {
	caps driver.Caps
	// acquire and renew, when set, replace the store's own.
	acquire func(ctx context.Context, req driver.Request) (driver.Grant, error)
	renew   func(ctx context.Context, batch []driver.Held) []driver.RenewResult
	// release, when set, runs before the store's own release.
	release func(ctx context.Context, h driver.Held)
	// inspect, when set, answers Inspect.
	inspect func(ctx context.Context, name string) (driver.Info, error)

	cut              atomic.Bool // every call fails, as with cut connections
	acquires, renews atomic.Int64

	mu       sync.Mutex
	locks    map[string]fakeLock
	tokens   map[string]uint64
	subs     map[string]map[chan struct{}]struct{}
	released []driver.Held
}

type fakeLock struct {
	owner   string
	token   uint64
	expires time.Time
}

var errFakeCut = errors.New("fake: connections cut")

func newFake() *fakeDriver {
	return &fakeDriver{caps: fakeCaps(), locks: map[string]fakeLock{}, tokens: map[string]uint64{},
		subs: map[string]map[chan struct{}]struct{}{}}
}

func fakeCaps() driver.Caps {
	return driver.Caps{MaxNameLen: 1024, MinTTL: time.Millisecond, TTLResolution: time.Millisecond}
}

func (d *fakeDriver) Caps() driver.Caps { return d.caps }

func (d *fakeDriver) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	d.acquires.Add(1)
	if d.acquire != nil {
		return d.acquire(ctx, req)
	}
	return storeAcquire(d, req)
}

// storeAcquire is the fake store's own Acquire, which overrides call to
// take the lock at a moment of their choosing.
func storeAcquire(d *fakeDriver, req driver.Request) (driver.Grant, error) {
	if d.cut.Load() {
		return driver.Grant{}, errFakeCut
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	key := fakeKey(req.Name, req.Kind)
	if l, ok := d.locks[key]; ok && now.Before(l.expires) {
		if l.owner != req.Owner {
			return driver.Grant{Retry: l.expires.Sub(now)}, nil
		}
		return driver.Grant{Acquired: true, Token: l.token, Holds: 1}, nil
	}
	d.tokens[key]++
	tok := d.tokens[key]
	d.locks[key] = fakeLock{owner: req.Owner, token: tok, expires: now.Add(req.TTL)}
	return driver.Grant{Acquired: true, Token: tok, Holds: 1}, nil
}

func (d *fakeDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	d.renews.Add(1)
	if d.renew != nil {
		return d.renew(ctx, batch)
	}
	return storeRenew(d, batch)
}

// storeRenew is the fake store's own Renew: what fakeDriver.Renew does when
// no override is set, and what overrides call to apply a renewal and then
// delay or reorder its answer.
func storeRenew(d *fakeDriver, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	for i, h := range batch {
		l, ok := d.locks[fakeKey(h.Name, h.Kind)]
		switch {
		case d.cut.Load():
			res[i].Err = errFakeCut
		case !ok || l.token != h.Token || !now.Before(l.expires):
			res[i].Err = driver.ErrLeaseLost
		default:
			l.expires = now.Add(h.TTL)
			d.locks[fakeKey(h.Name, h.Kind)] = l
		}
	}
	return res
}

func (d *fakeDriver) Release(ctx context.Context, h driver.Held, _ int) error {
	if d.release != nil {
		d.release(ctx, h)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.released = append(d.released, h)
	if d.cut.Load() {
		return errFakeCut
	}
	if l, ok := d.locks[fakeKey(h.Name, h.Kind)]; !ok || l.token != h.Token {
		return driver.ErrLeaseLost
	}
	delete(d.locks, fakeKey(h.Name, h.Kind))
	for ch := range d.subs[h.Name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return nil
}

// fakeKey is the store key of a hold: the fake holds every kind as an
// exclusive lock, each family of a name apart (a Mutex's key is its name).
func fakeKey(name string, k driver.Kind) string {
	if f := k.Family(); f != driver.FamilyMutex {
		return fmt.Sprintf("%d\x00%s", f, name)
	}
	return name
}

func (d *fakeDriver) releases() []driver.Held {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]driver.Held(nil), d.released...)
}

// Subscribe implements driver.Notifier.
func (d *fakeDriver) Subscribe(_ context.Context, name string) (driver.Subscription, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch := make(chan struct{}, 1)
	if d.subs[name] == nil {
		d.subs[name] = map[chan struct{}]struct{}{}
	}
	d.subs[name][ch] = struct{}{}
	return &fakeSub{d: d, name: name, ch: ch}, nil
}

type fakeSub struct {
	d    *fakeDriver
	name string
	ch   chan struct{}
}

func (s *fakeSub) C() <-chan struct{} { return s.ch }
func (s *fakeSub) Close() error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	delete(s.d.subs[s.name], s.ch)
	return nil
}

func (d *fakeDriver) Inspect(ctx context.Context, name string) (driver.Info, error) {
	if d.inspect != nil {
		return d.inspect(ctx, name)
	}
	return driver.Info{}, nil
}
func (d *fakeDriver) Close() error { return nil }
func (d *fakeDriver) As(any) bool  { return false }
