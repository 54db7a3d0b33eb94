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
	mu   sync.Mutex // held by a check, or the release, while it runs
	done bool

	// A Release whose ctx ends while a check runs cuts the check short
	// (its statement's ctx ends: both clients then close the connection,
	// which gives the lock up, as the Release would have): the Release
	// would otherwise wait past its ctx until the check's own ctx, and its
	// grace, ran out; for a renewal, past the lease's deadline.
	cutMu  sync.Mutex
	cut    func() // ends the running check's statement; nil between checks
	cutAll bool   // a Release's ctx ended: every check from now on is cut
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
// Err reporting it lost.) A Release whose ctx ends while Check runs cuts
// it short at once.
func (h *ConnHold) Check(ctx context.Context, pkg string, ttl time.Duration, ping func(context.Context) error, closed func() bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return fmt.Errorf("%s: %w: released", pkg, driver.ErrLeaseLost)
	}
	pctx, release := graceCtx(ctx, Grace(ttl))
	pctx, cut := context.WithCancel(pctx)
	h.cutMu.Lock()
	if h.cutAll {
		cut()
	}
	h.cut = cut
	h.cutMu.Unlock()
	err := ping(pctx)
	h.cutMu.Lock()
	h.cut = nil
	h.cutMu.Unlock()
	cut()
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
//
// A check running as Release is called goes first; if ctx ends while it
// runs, Release cuts it short, which closes the connection, so Release
// returns soon after ctx ends, the lease lost.
func (h *ConnHold) Release(ctx context.Context, pkg string, unlock func(context.Context) error, keep, discard, free func()) error {
	h.lock(ctx)
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

// lock takes h.mu for a Release: if ctx ends first, it cuts the running
// check short (and any check after it), and then waits for it, which the
// closed connection makes quick.
func (h *ConnHold) lock(ctx context.Context) {
	if h.mu.TryLock() {
		return
	}
	stop := context.AfterFunc(ctx, func() {
		h.cutMu.Lock()
		defer h.cutMu.Unlock()
		h.cutAll = true
		if h.cut != nil {
			h.cut()
		}
	})
	h.mu.Lock()
	stop()
}
