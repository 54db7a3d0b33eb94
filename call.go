package dlock

import (
	"context"

	"github.com/dlock/dlock/driver"
)

// Call describes a Lock, TryLock, Unlock or Extend call, for Hooks.Call.
type Call struct {
	Op      string // "lock", "trylock", "unlock" or "extend"
	Backend string // the backend's URL scheme
	Name    string // the lock name
	Kind    string // the kind of hold: "exclusive" (a Mutex), "shared" or "write" (an RWMutex), "permit" (a Semaphore)
	Token   uint64 // Unlock, Extend: the lease's fencing token; 0 for Lock and TryLock
}

// call runs the Call hook, if there is one, for a call beginning with ctx.
// It returns the ctx the call goes on with and the function to call with its
// outcome (the granted token, or 0, and the call's error). A nil ctx is
// left alone: the call itself refuses it.
func (c *Client) call(ctx context.Context, op, name string, kind driver.Kind, token uint64) (context.Context, func(token uint64, err error)) {
	if c.hooks.Call == nil || ctx == nil {
		return ctx, func(uint64, error) {}
	}
	ctx, end := c.hooks.Call(ctx, Call{Op: op, Backend: c.scheme, Name: name, Kind: kind.String(), Token: token})
	if end == nil {
		end = func(uint64, error) {}
	}
	return ctx, end
}
