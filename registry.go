package dlock

import (
	"context"
	"time"

	"github.com/dlock/dlock/driver"
)

// The client's registry of holds: the live hold of each (name, owner,
// kind), which a re-entry shares, guarded by the client's mutex, and the
// holds detached from it whose store release is under way
// (core.Releases, under its own lock).

type holdKey struct {
	name, owner string
	kind        driver.Kind // families and kinds are held apart
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
	c.releases.Begin(k, &h.release)
	if c.holds[k] == h {
		delete(c.holds, k)
	}
}

// freed reports that the store release of the detached hold h is done.
func (c *Client) freed(h *hold) {
	c.releases.End(holdKey{h.name, h.owner, h.kind}, &h.release)
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
