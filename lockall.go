package dlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
)

// NamedLocker is a Locker with a name, as LockAll needs to order locks: a
// Mutex, or any lock with the same methods.
type NamedLocker interface {
	Locker
	Name() string
}

// Group is the hold of several locks taken together by LockAll or
// TryLockAll. Its methods are safe for concurrent use. A nil *Group, which
// a failed LockAll returns, holds nothing: no leases, Done closed, Err and
// Unlock wrapping ErrNotHeld.
type Group struct {
	leases []*Lease // in the caller's order
	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool

	mu       sync.Mutex
	unlocked bool
}

// LockAll locks every one of lockers, or none: it blocks until all are held
// and returns them as one Group. The locks are taken one after another in
// one global order (by name, then by backend), whatever the order they are
// given in, so two LockAll calls over overlapping sets cannot deadlock each
// other. If any Lock fails, or ctx ends while waiting, the locks taken so far
// are released and the error (naming that lock) is returned; nothing is
// left held. ctx bounds the wait only: releasing what was taken is not
// bounded by it (it has ended) but by 5 s (the releases run at once), so
// with a store cut off LockAll returns at most 5 s after ctx, and the locks
// not released then free themselves at their TTL. Naming one name twice on one backend
// (even through two clients: each Lock is a holder of its own, so the group
// would wait for itself) is refused with ErrInvalidName, as is a nil
// locker. So is one name on two stores of one kind (two Redis servers):
// dlock orders locks by name, kind of backend and kind of lock, and has no
// name for a store that would order two of a kind the same way in every
// process. A type of the caller's that embeds a *Mutex or *RWMutex is
// ordered as the lock it embeds; any other NamedLocker by its name alone.
// A wrapper that takes an RWMutex's read lock or a Semaphore's permit is
// such a NamedLocker: dlock cannot tell it from the lock's other kinds, so
// a group holding it beside the same RWMutex's write lock waits for itself
// until ctx ends, and two permits of one semaphore are refused as one name
// twice. With no lockers, LockAll returns an empty Group at once, whose
// Done stays open until its Unlock.
//
// Every backend takes the locks in order, one store operation (or wait) per
// lock; none takes them in one operation.
func LockAll(ctx context.Context, lockers ...NamedLocker) (*Group, error) {
	return lockAll(ctx, lockers, false)
}

// TryLockAll is LockAll without waiting: it returns an error wrapping
// ErrNotAcquired, having released what it took, if any lock is held by
// another owner.
func TryLockAll(ctx context.Context, lockers ...NamedLocker) (*Group, error) {
	return lockAll(ctx, lockers, true)
}

func lockAll(ctx context.Context, lockers []NamedLocker, try bool) (*Group, error) {
	op := "lockall"
	if try {
		op = "trylockall"
	}
	if ctx == nil {
		return nil, &Error{Op: op, Err: ErrNilContext}
	}
	type item struct {
		i       int
		name    string
		backend string
		family  driver.Family // a Mutex and an RWMutex of one name are two locks
	}
	items := make([]item, len(lockers))
	for i, lk := range lockers {
		if isNilLocker(lk) {
			return nil, &Error{Op: op, Err: fmt.Errorf("%w: locker %d of %d is nil", ErrInvalidName, i+1, len(lockers))}
		}
		it := item{i: i, name: lk.Name()}
		// Through lockKey, not the concrete type, so that a type of the
		// caller's embedding a *Mutex or *RWMutex sorts as the lock it
		// wraps: sorted as another, it was taken in another order by a
		// group given the lock itself, and two such groups deadlocked.
		if k, ok := lk.(interface {
			lockKey() (*Client, driver.Family)
		}); ok {
			if c, family := k.lockKey(); c != nil {
				it.backend, it.family = c.obs.scheme, family
			}
		}
		items[i] = it
	}
	slices.SortStableFunc(items, func(a, b item) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.backend, b.backend), cmp.Compare(a.family, b.family))
	})
	for i := 1; i < len(items); i++ {
		a, b := items[i-1], items[i]
		if a.name == b.name && a.backend == b.backend && a.family == b.family { // one lock twice: the group would wait for itself
			return nil, &Error{Op: op, Name: a.name, Backend: a.backend, Err: fmt.Errorf("%w: the lock is given twice", ErrInvalidName)}
		}
	}
	g := &Group{leases: make([]*Lease, len(lockers))}
	for _, it := range items {
		start := time.Now()
		l, err := takeOne(ctx, lockers[it.i], try, g)
		if err == nil {
			if err = checkTaken(op, it.name, it.backend, l); err == nil || takenSince(l, start) {
				// A lease refused by checkTaken but granted by this call (a
				// Locker of the caller's naming one lock and locking
				// another) is released with the others: it was left
				// renewed until Close (an adversary pass).
				g.leases[it.i] = l
			}
		}
		if err != nil {
			g.releaseTaken(ctx)
			return nil, err
		}
	}
	// A member taken early may have been lost while a later one was waited
	// for: the group is not held then, so it is not returned.
	for _, l := range g.leases {
		if l.hold().CheckDeadline(); l.Err() != nil {
			err := l.Err()
			g.releaseTaken(ctx)
			return nil, &Error{Op: op, Name: l.Name(), Backend: l.backend(), Err: fmt.Errorf("lost while the others were taken: %w", err)}
		}
	}
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	for _, l := range g.leases {
		g.stops = append(g.stops, context.AfterFunc(l.l.Context(), func() { g.memberEnded(l) }))
	}
	return g, nil
}

// takeOne locks lk, releasing what g holds if lk does not return (a
// Locker of the caller's that panics or calls runtime.Goexit), and a lease
// lk returned with an error.
func takeOne(ctx context.Context, lk Locker, try bool, g *Group) (l *Lease, err error) {
	returned := false
	defer func() {
		if !returned {
			g.releaseTaken(ctx)
		}
	}()
	if try {
		l, err = lk.TryLock(ctx)
	} else {
		l, err = lk.Lock(ctx)
	}
	returned = true
	if err != nil && !l.none() { // a lease and an error: the contract says one or the other
		giveBack(ctx, l)
		l = nil
	}
	return l, err
}

// checkTaken returns an *Error if l, which a Locker of name returned with
// no error, is no hold on it: nil, a lease on another name, or a lease
// already unlocked (a Locker of the caller's that broke its contract). A
// lease lost since is left to the caller's check of losses.
func checkTaken(op, name, backend string, l *Lease) error {
	switch {
	case l.none():
		return &Error{Op: op, Name: name, Backend: backend, Err: fmt.Errorf("%w: the locker returned no lease and no error", ErrInvalidConfig)}
	case name != "" && l.Name() != name:
		return &Error{Op: op, Name: name, Backend: backend, Err: fmt.Errorf("%w: the locker returned a lease on %s", ErrInvalidConfig, driver.QuoteName(l.Name()))}
	case l.l.Context().Err() != nil && l.Err() == nil:
		return &Error{Op: op, Name: name, Backend: backend, Err: fmt.Errorf("%w: the locker returned a lease already unlocked", ErrInvalidConfig)}
	}
	return nil
}

// takenSince reports whether l was made at or after t: by the call that
// began at t (a new hold or a re-entry of one held before), and so that
// call's to give back, where a lease made before it (a Locker of the
// caller's returning a lease of the caller's) is not.
func takenSince(l *Lease, t time.Time) bool {
	return !l.none() && l.born >= int64(t.Sub(bornEpoch))
}

// lockKey is what LockAll orders a Mutex by, beside its name: its client
// and the family of locks it belongs to.
func (m *Mutex) lockKey() (*Client, driver.Family) { return m.c, driver.FamilyMutex }

// lockKey is the RWMutex's: see Mutex.lockKey.
func (rw *RWMutex) lockKey() (*Client, driver.Family) { return rw.c, driver.FamilyRWMutex }

// isNilLocker reports whether lk is nil, or a nil *Mutex or *RWMutex,
// which LockAll refuses rather than panicking on.
func isNilLocker(lk NamedLocker) bool {
	switch m := lk.(type) {
	case nil:
		return true
	case *Mutex:
		return m == nil
	case *RWMutex:
		return m == nil
	}
	return false
}

// memberEnded ends the group when one of its leases ends other than by the
// group's Unlock.
func (g *Group) memberEnded(l *Lease) {
	g.mu.Lock()
	unlocked := g.unlocked
	g.mu.Unlock()
	if unlocked {
		return
	}
	cause := l.Err()
	if cause == nil {
		cause = fmt.Errorf("dlock: lock %s of the group was unlocked: %w", driver.QuoteName(l.Name()), ErrLeaseLost)
	}
	g.cancel(cause)
}

// releaseBound bounds the releases of a LockAll that failed, and of a
// lease returned with an error: its ctx has ended, and a store cut off
// held it for as long as the store client waited, which for an SQL store in
// table mode (a new connection's startup never answered) was until the
// link came back (an adversary pass).
const releaseBound = 5 * time.Second

// giveBack releases l, which the caller does not keep, within
// releaseBound; ctx's values are kept, its cancellation is not.
func giveBack(ctx context.Context, l *Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseBound)
	defer cancel()
	_ = l.Unlock(ctx)
}

// releaseTaken releases, all at once and within releaseBound, what a
// failing LockAll took; ctx is the LockAll's (its values are kept).
func (g *Group) releaseTaken(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseBound)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range g.leases {
		if l != nil {
			wg.Go(func() { _ = l.Unlock(ctx) })
		}
	}
	wg.Wait()
}

// release unlocks the leases taken so far, in reverse order.
func (g *Group) release(ctx context.Context) error {
	var errs []error
	for i := len(g.leases) - 1; i >= 0; i-- {
		if l := g.leases[i]; l != nil {
			if err := l.Unlock(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Leases returns the group's leases, in the order the lockers were given,
// so each member's fencing token can be read; none for a nil *Group.
func (g *Group) Leases() []*Lease {
	if g.none() {
		return nil
	}
	return slices.Clone(g.leases)
}

// Done is closed when the group ends: when any member lease is lost (or
// unlocked on its own), at Client.Close, or by the group's Unlock.
func (g *Group) Done() <-chan struct{} {
	if g.none() {
		return closed
	}
	for _, l := range g.leases {
		l.hold().CheckDeadline() // as Lease.Done: a lease past its deadline is lost now
	}
	return g.ctx.Done()
}

// Err returns nil while every member is held and after Unlock; otherwise
// the error of the first member that ended (wrapping ErrLeaseLost, or
// ErrClosed).
func (g *Group) Err() error {
	if g.none() {
		return nilGroup("group")
	}
	for _, l := range g.leases {
		l.hold().CheckDeadline()
	}
	if g.ctx.Err() != nil {
		if cause := context.Cause(g.ctx); cause != errUnlocked {
			return cause
		}
		return nil
	}
	g.mu.Lock()
	unlocked := g.unlocked
	g.mu.Unlock()
	if unlocked {
		return nil
	}
	for _, l := range g.leases { // lost, the group's Done about to close
		if err := l.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Unlock releases every member. It returns the members' Unlock errors
// joined (a lost member's wraps ErrLeaseLost); every member is released
// whatever the others return.
func (g *Group) Unlock(ctx context.Context) error {
	switch {
	case g.none():
		return nilGroup("unlock group")
	case ctx == nil:
		return &Error{Op: "unlock group", Err: ErrNilContext}
	}
	g.mu.Lock()
	if g.unlocked {
		g.mu.Unlock()
		return &Error{Op: "unlock group", Err: ErrNotHeld}
	}
	g.unlocked = true
	g.mu.Unlock()
	for _, stop := range g.stops {
		stop()
	}
	err := g.release(ctx)
	g.cancel(errUnlocked)
	return err
}

// none reports whether g holds nothing: nil (a failed LockAll's), or a
// Group{} not made by LockAll.
func (g *Group) none() bool { return g == nil || g.ctx == nil }

// nilGroup is the error of op on a nil *Group: there is no hold to act on.
func nilGroup(op string) error {
	return &Error{Op: op, Err: fmt.Errorf("%w: the group is nil", ErrNotHeld)}
}
