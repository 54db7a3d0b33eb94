package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Locker is what Do locks: a Mutex, or any lock with the same methods.
type Locker interface {
	Lock(ctx context.Context) (*Lease, error)
	TryLock(ctx context.Context) (*Lease, error)
}

// DoOption configures Do.
type DoOption func(*doOptions)

type doOptions struct {
	maxWait time.Duration // 0: as long as ctx allows
	try     bool
}

// MaxWait bounds how long Do waits for the lock: after d it gives up with an
// error matching ErrNotAcquired and context.DeadlineExceeded. The bound
// covers the wait only; the work runs as long as ctx and the lease allow.
func MaxWait(d time.Duration) DoOption { return func(o *doOptions) { o.maxWait = d } }

// TryOnce makes Do try the lock once (TryLock) and give up with an error
// matching ErrNotAcquired if another holder has it: the "skip this run if
// another one is busy" of a cron job.
func TryOnce() DoOption { return func(o *doOptions) { o.try = true } }

// Do locks m, runs fn while holding the lock, and unlocks. The context passed
// to fn derives from ctx (not from a MaxWait bound), carries the lease (so a
// nested Do of the same lock re-enters it) and is cancelled when the lease is
// lost, with the loss as its cause (context.Cause wraps ErrLeaseLost): fn
// should watch it. Do returns fn's error, joined with a loss or unlock error
// if there was one. The lock is released even if fn panics. A nil ctx, m
// or fn is an *Error wrapping ErrNilContext, ErrInvalidName or
// ErrInvalidConfig, and nothing is locked.
func Do(ctx context.Context, m Locker, fn func(ctx context.Context, l *Lease) error, opts ...DoOption) (err error) {
	name, backend, nilLocker := lockerID(m)
	switch {
	case ctx == nil:
		return &Error{Op: "do", Backend: backend, Name: name, Err: ErrNilContext}
	case nilLocker:
		return &Error{Op: "do", Backend: backend, Name: name, Err: fmt.Errorf("%w: the locker is nil", ErrInvalidName)}
	case fn == nil:
		return &Error{Op: "do", Backend: backend, Name: name, Err: fmt.Errorf("%w: the function to run is nil", ErrInvalidConfig)}
	}
	var o doOptions
	for _, opt := range opts {
		opt(&o)
	}
	wait, cancelWait := ctx, context.CancelFunc(func() {})
	if o.maxWait > 0 {
		wait, cancelWait = context.WithTimeout(ctx, o.maxWait)
	}
	var l *Lease
	start := time.Now()
	if o.try {
		l, err = m.TryLock(wait)
	} else {
		l, err = m.Lock(wait)
	}
	cancelWait()
	back := err != nil && !l.none() // a lease and an error, from a Locker of the caller's
	if err == nil {
		err = checkTaken("do", name, backend, l)
		back = err != nil && takenSince(l, start) // as in LockAll
	}
	if back {
		giveBack(ctx, l)
	}
	if err != nil {
		return err
	}
	return whileHeld(ctx, ContextWithLease(ctx, l), l.l.Context(), l.Unlock,
		func(ctx context.Context) error { return fn(ctx, l) })
}

// whileHeld runs fn under a hold: fn's context derives from parent and is
// cancelled, with the cause, when held (the hold's own context) ends. Then,
// even if fn panics, release gives the hold up, with ctx's values but not
// its cancellation. It returns fn's error, joined with release's unless
// fn's already matches it.
func whileHeld(ctx, parent, held context.Context, release func(context.Context) error, fn func(context.Context) error) (err error) {
	wctx, cancel := context.WithCancelCause(parent)
	stop := context.AfterFunc(held, func() { cancel(context.Cause(held)) })
	defer func() {
		stop()
		cancel(nil)
		rerr := release(context.WithoutCancel(ctx))
		if rerr != nil && !errors.Is(err, rerr) {
			err = errors.Join(err, rerr)
		}
	}()
	return fn(wctx)
}

// lockerID names what m locks, for Do's errors, as far as m tells; isNil
// reports a nil m or a nil lock behind it, which Do cannot lock.
func lockerID(m Locker) (name, backend string, isNil bool) {
	var c *Client
	switch v := m.(type) {
	case nil:
		return "", "", true
	case *Mutex:
		if v == nil {
			return "", "", true
		}
		c, name = v.c, v.name
	case *RWMutex:
		if v == nil {
			return "", "", true
		}
		c, name = v.c, v.name
	case rlocker:
		if v.rw == nil {
			return "", "", true
		}
		c, name = v.rw.c, v.rw.name
	case semLocker:
		if v.s == nil {
			return "", "", true
		}
		c, name = v.s.c, v.s.name
	case NamedLocker:
		return v.Name(), "", false
	}
	if c != nil {
		backend = c.Backend()
	}
	return name, backend, false
}
