package dlock

import (
	"context"
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
)

// fakeDriver is an in-package driver whose every call a test can script, as
// database/sql's fakedb is: it tests the portable layer's own logic (waiting,
// the grant guard, renewal and loss) apart from any store.
type fakeDriver struct {
	caps    driver.Caps
	acquire func(ctx context.Context, req driver.Request) (driver.Grant, error)
	renew   func(ctx context.Context, batch []driver.Held) []driver.RenewResult

	mu       sync.Mutex
	released []driver.Held
}

func (d *fakeDriver) Caps() driver.Caps { return d.caps }

func (d *fakeDriver) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	return d.acquire(ctx, req)
}

func (d *fakeDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	if d.renew != nil {
		return d.renew(ctx, batch)
	}
	return make([]driver.RenewResult, len(batch))
}

func (d *fakeDriver) Release(_ context.Context, h driver.Held, _ int) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.released = append(d.released, h)
	return 0, nil
}

func (d *fakeDriver) releases() []driver.Held {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]driver.Held(nil), d.released...)
}

func (d *fakeDriver) Inspect(context.Context, string) (driver.Info, error) { return driver.Info{}, nil }
func (d *fakeDriver) Close() error                                         { return nil }
func (d *fakeDriver) As(any) bool                                          { return false }

func fakeCaps() driver.Caps {
	return driver.Caps{MaxNameLen: 1024, MinTTL: time.Millisecond, TTLResolution: time.Millisecond}
}
