package dlock

import (
	"context"

	"github.com/dlock/dlock/driver"
)

// leaseKey is the context key of the leases a ctx carries.
type leaseKey struct{}

// ctxLeases is the chain of leases a ctx carries, innermost first.
type ctxLeases struct {
	l    *Lease
	next *ctxLeases
}

// ContextWithLease returns a copy of ctx that carries l: a Lock of l's lock
// through this client with that ctx (or one derived from it) re-enters l's
// hold instead of waiting for it, as long as l is live. Do passes such a ctx
// to its function, so a nested Do of the same lock re-enters. The returned
// ctx is not cancelled when l ends; Do's is.
func ContextWithLease(ctx context.Context, l *Lease) context.Context {
	next, _ := ctx.Value(leaseKey{}).(*ctxLeases)
	return context.WithValue(ctx, leaseKey{}, &ctxLeases{l: l, next: next})
}

// leaseIn returns the innermost live lease of c's lock name that ctx
// carries, or nil. A lease past its deadline is not live: it is ended as
// lost here, as Err would.
// Only leases of kind's family count (a Mutex, RWMutex and Semaphore of one
// name are three locks).
func leaseIn(ctx context.Context, c *Client, name string, kind driver.Kind) *Lease {
	for x, _ := ctx.Value(leaseKey{}).(*ctxLeases); x != nil; x = x.next {
		if x.l.h.c == c && x.l.h.name == name && x.l.h.kind.Family() == kind.Family() &&
			x.l.ctx.Err() == nil && x.l.h.checkDeadline() == nil {
			return x.l
		}
	}
	return nil
}
