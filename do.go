package dlock

import (
	"context"
	"errors"
)

// Do locks m, runs fn while holding the lock, and unlocks. The context passed
// to fn is cancelled when the lease is lost (its cause then wraps
// ErrLeaseLost), so fn should watch it. Do returns fn's error, joined with a
// loss or unlock error if there was one. The lock is released even if fn
// panics.
func Do(ctx context.Context, m Locker, fn func(ctx context.Context, l *Lease) error) (err error) {
	if ctx == nil {
		return ErrNilContext
	}
	l, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
	defer func() {
		stop()
		cancel(nil)
		uerr := l.Unlock(context.WithoutCancel(ctx))
		if uerr != nil && !errors.Is(err, uerr) {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(wctx, l)
}
