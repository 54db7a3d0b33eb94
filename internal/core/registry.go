package core

import (
	"context"
	"time"
)

// The engine's registry of holds: the live hold of each (name, owner,
// kind), which a re-entry shares, guarded by the engine's mutex, and the
// holds detached from it whose store release is under way (Releases,
// under its own lock).

// detach removes h from the client and the scheduler. It reports false if h
// had already ended (unlocked, lost or closed), so only one caller ends it.
func (e *Engine) detach(h *Hold) bool {
	e.mu.Lock()
	if h.detached {
		e.mu.Unlock()
		return false
	}
	e.detachLocked(h)
	e.mu.Unlock()
	e.sched.Remove(&h.ka)
	return true
}

// detachLocked removes h from the client. e.mu must be held. The caller
// then releases h in the store and calls freed.
func (e *Engine) detachLocked(h *Hold) {
	h.detached = true
	k := holdKey{h.name, h.owner, h.kind}
	e.releases.Begin(k, &h.release)
	if e.holds[k] == h {
		delete(e.holds, k)
	}
}

// freed reports that the store release of the detached hold h is done.
func (e *Engine) freed(h *Hold) {
	e.releases.End(holdKey{h.name, h.owner, h.kind}, &h.release)
}

// Lost ends h with err (wrapping ErrLeaseLost), from the scheduler or a
// session watcher. It detaches h, marks its leases ended and records err on
// h in one step under e.mu, so an Unlock or Err racing it (in either order)
// reports the loss; then it closes the leases' Done and runs the Lost hook.
// Done goes first: loss is declared only just before the store may free
// the lock, and a hook that took longer than that margin (a log shipped
// over the network) let another client hold the lock while the holder's Do
// ctx was still live (an adversary pass).
func (e *Engine) Lost(h *Hold, err error) { e.lost(h, err, false) }

// lostInCall is Lost for a loss found inside a call that Close waits for (a
// Lock, an Unlock): see lostHook.
func (e *Engine) lostInCall(h *Hold, err error) { e.lost(h, err, true) }

// lostHook runs the Lost hook. inCall says that the goroutine is inside a
// call Close waits for (counted by beginAcquire or beginCallLocked): the
// call is not counted while the hook runs, since a hook that closes the
// client waited for the very call that ran it, the 10 s of Close's drain,
// and the call then ended in ErrClosed (an adversary pass).
func (e *Engine) lostHook(ctx context.Context, h *Hold, err error, inCall bool) {
	if inCall {
		e.endAcquire()
		defer e.beginCallLocking()
	}
	e.obs.Lost(ctx, h, err)
}

// beginCallLocking is beginCallLocked, taking e.mu.
func (e *Engine) beginCallLocking() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.beginCallLocked()
}

func (e *Engine) lost(h *Hold, err error, inCall bool) {
	err = e.wrap("lease", h.name, err)
	e.mu.Lock()
	if h.detached {
		e.mu.Unlock()
		return
	}
	h.lostErr.Store(&err)
	n := 1
	if e.caps.Reentrant {
		n = max(len(h.leases), 1)
	}
	ls := h.leases
	h.leases = nil
	for _, l := range ls {
		l.ended = true
	}
	e.detachLocked(h)
	e.mu.Unlock()
	e.sched.Remove(&h.ka)
	for _, l := range ls {
		l.cancel(err)
	}
	e.log.Warn("dlock: lease lost", "backend", e.cfg.Scheme, "name", h.name, "token", h.token, "err", err)
	e.lostHook(context.Background(), h, err, inCall)
	// Close waits for the releases below once it has set closed: count this
	// one before then, or release it on this goroutine (as when the hook
	// above closed the client).
	e.mu.Lock()
	async := !e.closed
	if async {
		e.cleanup.Add(1)
	}
	e.mu.Unlock()
	release := func() { // let the driver free the hold's state; the store refuses it if it changed hands
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = e.drv.Release(ctx, h.Held(), n)
		e.freed(h)
	}
	if !async {
		release()
		return
	}
	go func() {
		defer e.cleanup.Done()
		release()
	}()
}
