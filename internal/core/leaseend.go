package core

import "context"

// A lease's end is kept as its cause, and its context is made only when
// somebody asks for it (Context, Done): most leases are unlocked by a holder
// that never looks, and a context.WithCancelCause per lease was a third of
// the portable layer's garbage per Lock+Unlock.

// unlockedCause is the cause every Unlock stores: one pointer, no allocation.
var unlockedCause = &ErrUnlocked

// leaseCtx is a lease's context, once made.
type leaseCtx struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// cancel ends l with cause; the first cause stays, as with a context's.
func (l *Lease) cancel(cause error) {
	if cause == nil {
		cause = context.Canceled // as a context's cancel(nil)
	}
	p := unlockedCause
	if cause != ErrUnlocked {
		p = &cause
	}
	l.cause.CompareAndSwap(nil, p)
	if c := l.lctx.Load(); c != nil {
		c.cancel(*l.cause.Load())
	}
}

// endCause is why l ended, or nil while it is live (ErrUnlocked after Unlock).
func (l *Lease) endCause() error {
	if p := l.cause.Load(); p != nil {
		return *p
	}
	return nil
}

// context returns l's context, made on the first call: cancelled with
// l's cause at once if l has already ended.
func (l *Lease) context() context.Context {
	if c := l.lctx.Load(); c != nil {
		return c.ctx
	}
	c := new(leaseCtx)
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	if !l.lctx.CompareAndSwap(nil, c) {
		c.cancel(nil)
		return l.lctx.Load().ctx
	}
	// A cancel that stored its cause before the CompareAndSwap did not see
	// c: end it here. One after sees c and ends it itself.
	if p := l.cause.Load(); p != nil {
		c.cancel(*p)
	}
	return c.ctx
}
