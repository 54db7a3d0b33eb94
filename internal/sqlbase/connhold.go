package sqlbase

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
)

// ConnHold is what both backends keep of a lock held by a dedicated
// connection (row and session modes) beyond the connection itself: a mutex
// that orders the checks and the release, and whether the hold was
// released. The zero value is ready.
type ConnHold struct {
	mu   sync.Mutex
	done bool
}

// Check confirms, with ping, that the holding connection is alive: any
// failure on it means the server has dropped, or will drop, the lock, so
// the lease is lost; unless ctx ended first and the connection is not
// known to be closed (closed reports that; nil when the client cannot
// tell), which leaves it uncertain. A ping that succeeded proves the lock
// only with the connection still open after it: a client library may close
// it as ctx ends even though the statement finished (go-sql-driver does).
// pkg prefixes the errors.
func (h *ConnHold) Check(ctx context.Context, pkg string, ping func(context.Context) error, closed func() bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return fmt.Errorf("%s: %w: released", pkg, driver.ErrLeaseLost)
	}
	err := ping(ctx)
	isClosed := closed != nil && closed()
	if err == nil && !isClosed {
		return nil
	}
	if err == nil {
		err = errors.New("closed as the check's ctx ended")
	}
	if ctx.Err() != nil && !isClosed {
		return fmt.Errorf("%s: renew: %w", pkg, err) // uncertain: the connection may be fine
	}
	return fmt.Errorf("%s: %w: the connection holding the lock failed: %v", pkg, driver.ErrLeaseLost, err)
}

// Release gives the hold up, once. unlock gives the lock up on the
// connection, within five seconds; then keep returns the connection to the
// pool, or, if unlock failed, discard closes it (the server drops whatever
// it held) and the lease is reported lost. free runs last, on the first
// Release only. pkg prefixes the errors.
func (h *ConnHold) Release(ctx context.Context, pkg string, unlock func(context.Context) error, keep, discard, free func()) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return fmt.Errorf("%s: release: %w", pkg, driver.ErrLeaseLost)
	}
	h.done = true
	defer free()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := unlock(ctx); err != nil {
		discard()
		return fmt.Errorf("%s: release: %w: %v", pkg, driver.ErrLeaseLost, err)
	}
	keep()
	return nil
}
