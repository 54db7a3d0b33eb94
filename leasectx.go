package dlock

import (
	"context"

	"github.com/dlock/dlock/internal/core"
)

// ContextWithLease returns a copy of ctx that carries l: a Lock of l's lock
// through this client with that ctx (or one derived from it) re-enters l's
// hold instead of waiting for it, as long as l is live. Do passes such a ctx
// to its function, so a nested Do of the same lock re-enters. The returned
// ctx is not cancelled when l ends; Do's is. A nil l, or a nil ctx,
// returns ctx as it is (a nil ctx is ErrNilContext to dlock's calls).
func ContextWithLease(ctx context.Context, l *Lease) context.Context {
	if l.none() || ctx == nil {
		return ctx
	}
	return core.ContextWithLease(ctx, &l.l)
}
