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
//
// Both client libraries close a connection whose statement's ctx ends
// mid-statement, which frees the lock: an Extend whose caller's ctx ended
// while its statement was on the wire ended the lease. So ping's ctx ends
// only Grace(ttl) after ctx does (ttl: the renewal's or the Extend's): a
// statement on a live connection finishes, and the lease goes on; one on
// a connection that cannot answer by then is cut short as before. Check
// returns at most that long after ctx ends. (A renewal so runs past the
// lease's deadline; an Unlock waiting for it meanwhile leaves the lease's
// Err reporting it lost.)
func (h *ConnHold) Check(ctx context.Context, pkg string, ttl time.Duration, ping func(context.Context) error, closed func() bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return fmt.Errorf("%s: %w: released", pkg, driver.ErrLeaseLost)
	}
	pctx, release := graceCtx(ctx, Grace(ttl))
	err := ping(pctx)
	release()
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

// Grace is how long a holding connection's check may run on after its
// ctx ends (see ConnHold.Check): a third of the TTL, at most a second.
func Grace(ttl time.Duration) time.Duration { return min(ttl/3, time.Second) }

// graceCtx is ctx, with its values, whose end comes grace after ctx's;
// release frees what it holds once the call that uses it has returned.
// A ctx that has ended already is returned as it is: its statement is not
// sent (the clients check first), and a batch of checks run after their
// ctx ended fails at once rather than a grace each.
func graceCtx(ctx context.Context, grace time.Duration) (context.Context, func()) {
	if ctx.Err() != nil {
		return ctx, func() {}
	}
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-gctx.Done(): // released
		}
	})
	return gctx, func() { stop(); cancel() }
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
