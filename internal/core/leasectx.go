package core

import "context"

// leaseKey is the context key of the leases a ctx carries.
type leaseKey struct{}

// ctxLeases is the chain of leases a ctx carries, innermost first.
type ctxLeases struct {
	l    *Lease
	next *ctxLeases
}

// ContextWithLease is dlock.ContextWithLease: a copy of ctx that carries
// l, which a Lock of its lock through its engine with that ctx re-enters.
func ContextWithLease(ctx context.Context, l *Lease) context.Context {
	next, _ := ctx.Value(leaseKey{}).(*ctxLeases)
	return context.WithValue(ctx, leaseKey{}, &ctxLeases{l: l, next: next})
}
