package core

import (
	"context"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/keepalive"
)

// What package dlock's white-box tests look at in an engine: nothing here
// is for its non-test code.

// Sched returns the engine's renewal scheduler.
func (e *Engine) Sched() *keepalive.Scheduler { return e.sched }

// WaitCleanup waits for the best-effort releases of lost holds.
func (e *Engine) WaitCleanup() { e.cleanup.Wait() }

// TurnBlocked reports whether the acquisition holding the owner's turn on
// (name, kind) waits for another owner.
func (e *Engine) TurnBlocked(name, owner string, kind driver.Kind) bool {
	return e.turns.Blocked(holdKey{name: name, owner: owner, kind: kind})
}

// Queued reports whether a waiter is in the local wait queue of key (see
// Spec.QueueKey).
func (e *Engine) Queued(key string) bool { return e.waiters.Taken(key) }

// Leftovers counts what the engine keeps per lock: owner turns, local wait
// lines, holds and releases under way (all 0 when nothing is held).
func (e *Engine) Leftovers() (turns, lines, holds, releases int) {
	e.mu.Lock()
	holds = len(e.holds)
	e.mu.Unlock()
	return e.turns.Len(), e.waiters.Len(), holds, e.releases.Len()
}

// LeaseIn returns the live lease of e's lock name in kind's family that
// ctx carries, or nil: what a Lock with ctx re-enters.
func LeaseIn(ctx context.Context, e *Engine, name string, kind driver.Kind) *Lease {
	return leaseIn(ctx, e, name, kind, false)
}
