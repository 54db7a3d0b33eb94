package core

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/turn"
)

const (
	pollMin = 5 * time.Millisecond // first backoff step when polling
	// PollMax is the backoff cap when polling.
	PollMax = time.Second
	// WakeMax is the longest wait for a notification before trying again.
	WakeMax = 5 * time.Second
	// ErrWait is the first pause after a store error while waiting.
	ErrWait = 50 * time.Millisecond
)

// obtain gets a hold for req: one attempt with try, otherwise waiting until
// granted, ctx ends or the client closes. It returns the grant and when the
// granting request was sent.
//
// With fresh (req.Owner was made for this one call), a store without
// blocking waits, and an attempt whose reply was lost (an error: it may
// have been applied), obtain that fails gives back whatever hold the owner
// has in the store before it returns (see undo).
func (e *Engine) obtain(ctx context.Context, t *turn.Turn[holdKey], req driver.Request, try, fresh bool) (g driver.Grant, sent time.Time, err error) {
	var uncertain, forget bool
	g, sent, err = e.obtain1(ctx, t, req, try, &uncertain, &forget)
	if undo := err != nil && uncertain && fresh && !e.caps.Blocking; undo || forget {
		// One bound for both: against a silent store they ran one after
		// the other, and an RWMutex.Lock cut by its ctx returned 4 s late.
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if undo {
			e.undo(cctx, req)
		}
		if forget {
			e.forgetWait(cctx, req)
		}
		cancel()
	}
	if err == nil && !try && !e.caps.Blocking && ctx.Err() != nil {
		// A polling attempt under way when ctx ended (most stores' requests
		// cannot be called back once sent) took the lock, maybe after the
		// caller gave up and after the holder let go: Lock promises the
		// error and nothing left behind when ctx ends first, so give it back.
		e.giveBack(ctx, req, g, fresh)
		return driver.Grant{}, time.Time{}, e.waitErr(ctx, nil)
	}
	return g, sent, err
}

// giveBack releases grant g of req, which its caller will not get: all its
// counts for a fresh owner (nobody else has it), else the one it added.
func (e *Engine) giveBack(ctx context.Context, req driver.Request, g driver.Grant, fresh bool) {
	n := 1
	if fresh {
		n = max(g.Holds, 1)
	}
	e.dropCounts(ctx, req, g, n)
}

// attempt is one Acquire of a wait by polling; it sets *uncertain on an
// error, after which the request may hold the lock.
func (e *Engine) attempt(ctx context.Context, req driver.Request, uncertain *bool) (driver.Grant, error) {
	g, err := e.drv.Acquire(ctx, req)
	if err != nil && !permanent(err) {
		*uncertain = true
	}
	return g, err
}

// obtain1 is obtain but for its clean-up: it sets *uncertain when an
// attempt failed without a certain answer (the hold may have been taken),
// and *forget when a read or write request's first attempt was cut by ctx
// (a record of the waiting request may have been left; see forgetWait).
func (e *Engine) obtain1(ctx context.Context, t *turn.Turn[holdKey], req driver.Request, try bool, uncertain, forget *bool) (driver.Grant, time.Time, error) {
	if !try && e.caps.Blocking { // the store queues waiters itself
		ctx, b := e.bindClose(ctx)
		defer e.unbind(b)
		t.Block(true)
		defer t.Block(false)
		req.Wait = true
		for errPause := ErrWait; ; errPause = min(errPause*2, PollMax) {
			sent := time.Now()
			g, err := e.drv.Acquire(ctx, req)
			switch {
			case err == nil && g.Acquired: // kept even if ctx just ended: it is held
				return g, sent, nil
			case err == nil:
				err = driver.ErrNotAcquired
			}
			if permanent(err) || ctx.Err() != nil {
				return g, sent, e.waitErr(ctx, err)
			}
			// The store may come back (a reconnect, a new session) before ctx ends.
			e.log.Debug("dlock: acquire failed while waiting", "backend", e.cfg.Scheme, "name", req.Name, "err", err)
			select {
			case <-time.After(jitter(errPause)):
			case <-ctx.Done():
				return g, sent, e.waitErr(ctx, err)
			}
		}
	}
	// One attempt first, not bound to Close: a Close meanwhile fails it
	// (the driver's connections close) or has grant give the hold back.
	sent := time.Now()
	g, err := e.attempt(ctx, req, uncertain)
	switch {
	case err == nil && g.Acquired:
		return g, sent, nil
	case err != nil && (try || permanent(err) || ctx.Err() != nil || e.closing.Err() != nil):
		// The attempt may have left the record of a waiting request (ctx
		// ended while the store answered): a free lock was then refused to
		// others for the record's life (2 s, pglock's table mode; an
		// adversary pass).
		*forget = !try && (req.Kind == driver.Shared || req.Kind == driver.Write)
		return g, sent, e.waitErr(ctx, err)
	case try:
		return g, sent, driver.ErrNotAcquired
	}
	ctx, b := e.bindClose(ctx)
	defer e.unbind(b)
	t.Block(true)
	defer t.Block(false)
	g, sent, err = e.wait(ctx, req, g.Retry, uncertain)
	*forget = err != nil && (req.Kind == driver.Shared || req.Kind == driver.Write)
	return g, sent, err
}

// undo gives back, best effort, the hold a fresh owner's request may have
// taken with an attempt whose reply was lost: the store shows the hold
// under the owner, which nobody else has, so every count of it is the
// request's.
func (e *Engine) undo(ctx context.Context, req driver.Request) {
	var info driver.Info
	var err error
	if req.Kind == driver.Exclusive {
		info, err = e.drv.Inspect(ctx, req.Name)
		if err == nil && info.Held && info.Owner == req.Owner {
			info.Holders = []driver.Holder{{Owner: info.Owner, Kind: req.Kind, Token: info.Token, Holds: info.Holds}}
		}
	} else if ki, ok := e.drv.(driver.KindInspector); ok {
		info, err = ki.InspectKind(ctx, req.Name, req.Kind)
	}
	if err != nil {
		e.log.Debug("dlock: cannot check for a hold taken by a failed attempt", "backend", e.cfg.Scheme, "name", req.Name, "err", err)
		return
	}
	for _, h := range info.Holders {
		if h.Owner == req.Owner && h.Kind == req.Kind && h.Token != 0 {
			e.log.Debug("dlock: a failed attempt took the lock; released", "backend", e.cfg.Scheme, "name", req.Name, "token", h.Token)
			_ = e.drv.Release(ctx, driver.Held{Name: req.Name, Owner: req.Owner, TTL: req.TTL, Kind: req.Kind, Token: h.Token},
				max(h.Holds, 1))
		}
	}
}

// dropCounts releases n counts of grant g that no lease will release: a
// fresh owner's counts added by earlier attempts of the same call (their
// replies lost), or a grant that came after ctx ended (giveBack).
func (e *Engine) dropCounts(ctx context.Context, req driver.Request, g driver.Grant, n int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	held := driver.Held{Name: req.Name, Owner: req.Owner, TTL: req.TTL, Kind: req.Kind, Token: g.Token, Handle: g.Handle}
	if err := e.drv.Release(ctx, held, n); err != nil {
		e.log.Debug("dlock: cannot drop counts of lost attempts", "backend", e.cfg.Scheme, "name", req.Name, "err", err)
	}
}

// forgetWait tells the store that a read or write request gave up its wait,
// so that the record keeping its place in line (see driver.Driver.Release)
// does not hold back the waiters behind it, nor a later TryLock, for the
// record's life: a Release of the owner with token 0, which no hold has.
func (e *Engine) forgetWait(ctx context.Context, req driver.Request) {
	_ = e.drv.Release(ctx, driver.Held{Name: req.Name, Owner: req.Owner, TTL: req.TTL, Kind: req.Kind}, 1)
}

// wait queues behind the client's other waiters for req.Name, so that a
// release wakes one waiter per process, then tries again on every release
// notification, at the holder's expiry, or with capped exponential backoff and
// jitter where the store cannot notify.
func (e *Engine) wait(ctx context.Context, req driver.Request, retry time.Duration, uncertain *bool) (driver.Grant, time.Time, error) {
	first, err := e.waiters.Take(ctx, Spec{Name: req.Name, Kind: req.Kind}.QueueKey(), turn.Wait)
	if err != nil {
		return driver.Grant{}, time.Time{}, e.waitErr(ctx, nil)
	}
	defer first.Done()
	var wake <-chan struct{}
	if n, ok := e.drv.(driver.Notifier); ok {
		sub, err := n.Subscribe(ctx, req.Name)
		if err != nil {
			e.log.Debug("dlock: subscribe failed; polling", "backend", e.cfg.Scheme, "name", req.Name, "err", err)
		} else {
			defer sub.Close()
			wake = sub.C()
		}
	}
	backoff, errPause := pollMin, ErrWait
	var lastErr error
	timer := time.NewTimer(0)
	defer timer.Stop()
	// Without notifications nothing can have changed for us since obtain's
	// attempt but the holder's expiry: wait first (no longer than the
	// holder's remaining TTL it reported). With them, try again at once,
	// since a release before the subscription was in place sent no message.
	skip := wake == nil
	for {
		var g driver.Grant
		var err error
		sent := time.Now()
		if !skip {
			g, err = e.attempt(ctx, req, uncertain)
		}
		switch {
		case skip:
			skip = false
		case err != nil: // the store may come back before ctx ends: keep trying
			if ctx.Err() != nil {
				return g, sent, e.waitErr(ctx, err)
			}
			lastErr = err
			e.log.Debug("dlock: acquire failed while waiting", "backend", e.cfg.Scheme, "name", req.Name, "err", err)
			retry, errPause = errPause, min(errPause*2, PollMax)
		case g.Acquired:
			return g, sent, nil
		default:
			retry, errPause = g.Retry, ErrWait
		}
		var d time.Duration
		if wake != nil && err == nil {
			d = WakeMax
		} else {
			d = jitter(backoff)
			backoff = min(backoff*2, PollMax)
		}
		if retry > 0 && retry < d { // the holder's lease ends first
			d = retry + time.Millisecond
		}
		timer.Reset(d)
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return driver.Grant{}, time.Time{}, e.waitErr(ctx, lastErr)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// permanent reports an error that waiting will not cure.
func permanent(err error) bool {
	for _, e := range []error{driver.ErrUnsupported, driver.ErrInvalidName, driver.ErrInvalidTTL, driver.ErrInvalidOwner, driver.ErrInvalidConfig, driver.ErrClosed, driver.ErrLimitMismatch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// waitErr turns the end of a wait into the error Lock returns: driver.ErrClosed if
// the client closed, ctx's error if it ended, else err.
func (e *Engine) waitErr(ctx context.Context, err error) error {
	switch {
	case e.closing.Err() != nil:
		return driver.ErrClosed
	case ctx.Err() != nil && err != nil && !errors.Is(err, ctx.Err()):
		return errors.Join(ctx.Err(), err)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return err
}

// jitter returns a duration in [d/2, d).
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// gaveUp makes the error of a wait that ended with ctx match driver.ErrNotAcquired
// as well as ctx's error, so callers need one check. Its text does not
// say "held by another owner" (ErrNotAcquired's own) unless a store
// answered so: a wait whose store did not answer says what it got.
func gaveUp(ctx context.Context, err error) error {
	if ctx.Err() == nil || errors.Is(err, driver.ErrNotAcquired) || errors.Is(err, driver.ErrClosed) {
		return err
	}
	return notAcquired{err}
}

// notAcquired is a wait given up without an answer that the lock is held:
// it matches driver.ErrNotAcquired and wraps what ended it.
type notAcquired struct{ err error }

func (e notAcquired) Error() string {
	return "dlock: lock not acquired: " + strings.ReplaceAll(e.err.Error(), "\n", ": ")
}
func (e notAcquired) Is(target error) bool { return target == driver.ErrNotAcquired }
func (e notAcquired) Unwrap() error        { return e.err }

// waits are the contexts of the waits under way (see bindClose), which
// Close cancels.
type waits struct {
	mu     sync.Mutex
	closed bool
	last   bound
	cancel map[bound]context.CancelFunc
}

// bound names one wait's context in the engine's waits.
type bound uint64

// bindClose returns a ctx that also ends when the client closes, for a
// wait, and its name, which unbind lets go. Close cancels it from the
// engine's waits: a context.AfterFunc on e.closing, and a closure to stop
// both, would cost three allocations more on every Lock of a blocking
// store, which binds its one round trip.
func (e *Engine) bindClose(ctx context.Context) (context.Context, bound) {
	ctx, cancel := context.WithCancel(ctx)
	w := &e.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		cancel()
		return ctx, 0
	}
	if w.cancel == nil {
		w.cancel = map[bound]context.CancelFunc{}
	}
	w.last++
	w.cancel[w.last] = cancel
	return ctx, w.last
}

// unbind lets the context of wait b go.
func (e *Engine) unbind(b bound) {
	w := &e.waits
	w.mu.Lock()
	cancel := w.cancel[b]
	delete(w.cancel, b)
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// endWaits cancels the context of every wait, and of every wait bound
// from now on, for Close.
func (e *Engine) endWaits() {
	w := &e.waits
	w.mu.Lock()
	w.closed = true
	cancels := w.cancel
	w.cancel = nil
	w.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}
