package dlock

import "context"

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
