package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/keepalive"
	"github.com/dlock/dlock/internal/turn"
)

// ErrNilContext is the error of a call given a nil context (package dlock
// exports it).
var ErrNilContext = errors.New("dlock: nil context")

// Observer is told of the engine's events; package dlock turns them into
// its hooks. The engine calls it holding none of its own locks, so it may
// call back into the engine (a Lost hook may close the client).
type Observer interface {
	Acquired(ctx context.Context, h *Hold, wait time.Duration)
	Refused(ctx context.Context, s Spec, wait time.Duration, err error)
	Released(ctx context.Context, h *Hold)
	Renewed(h *Hold, latency time.Duration, err error)
	Lost(ctx context.Context, h *Hold, err error)
}

// Config is what an Engine needs besides its driver.
type Config struct {
	Scheme   string // the backend's URL scheme, in logs
	Label    string // the default holder label
	Log      *slog.Logger
	Observer Observer
	// Wrap makes the error of operation op on the lock name from err (nil
	// stays nil): package dlock's *Error.
	Wrap func(op, name string, err error) error
}

// Engine is the part of a client that holds locks: the one acquire path,
// the registry of holds and their renewal. Its state is its own; package
// dlock reaches it through the methods below.
type Engine struct {
	drv   driver.Driver
	caps  driver.Caps
	cfg   Config
	log   *slog.Logger
	obs   Observer
	wrap  func(op, name string, err error) error
	sched *keepalive.Scheduler

	// closing is cancelled by Close, which wakes every waiter.
	closing context.Context
	cancel  context.CancelFunc
	waits   waits // the contexts of the waits under way, which Close cancels

	cleanup sync.WaitGroup // best-effort releases of lost holds

	mu     sync.Mutex
	closed bool
	// acquiring counts the acquisitions under way (Acquire, Campaign); Close
	// waits for them (drained) before it closes the driver, since one may
	// still have to undo in the store what it was granted.
	acquiring int
	drained   chan struct{}
	holds     map[holdKey]*Hold // per (name, owner, kind): the live hold, which a re-entry shares
	// per (name, owner, kind): one acquisition at a time, so a second Lock
	// by the owner re-enters the hold the first one got
	turns turn.Set[holdKey]
	// per queue key: local waiters in arrival order, so a release wakes
	// one waiter per process
	waiters turn.Set[string]
	// per (name, owner, kind): the store release under way of the owner's
	// detached hold. A Lock by that owner waits for it, or the store would
	// grant it as a re-entry of the hold the release then deletes.
	releases Releases[holdKey]
}

// DefaultMaxNameLen is the longest lock name, in bytes, where the driver
// does not say.
const DefaultMaxNameLen = 1024

// NewEngine makes the engine of a client over d.
func NewEngine(d driver.Driver, cfg Config) *Engine {
	caps := d.Caps()
	if caps.MaxNameLen <= 0 {
		caps.MaxNameLen = DefaultMaxNameLen
	}
	e := &Engine{drv: d, caps: caps, cfg: cfg, log: cfg.Log, obs: cfg.Observer, wrap: cfg.Wrap, holds: map[holdKey]*Hold{}}
	e.closing, e.cancel = context.WithCancel(context.Background())
	e.sched = keepalive.NewScheduler(d,
		heldOf,
		func(k *keepalive.Entry, err error) { e.Lost(k.Ref.(*Hold), err) },
		func(k *keepalive.Entry, latency time.Duration, err error) { e.renewed(k.Ref.(*Hold), latency, err) })
	return e
}

// Driver returns the engine's driver.
func (e *Engine) Driver() driver.Driver { return e.drv }

// Caps returns the driver's capabilities, with the default name limit.
func (e *Engine) Caps() driver.Caps { return e.caps }

// Closing is cancelled when the engine closes.
func (e *Engine) Closing() context.Context { return e.closing }

// Log is the engine's logger.
func (e *Engine) Log() *slog.Logger { return e.log }

// Wrap is Config.Wrap.
func (e *Engine) Wrap(op, name string, err error) error { return e.wrap(op, name, err) }

// Closed reports whether Close has begun.
func (e *Engine) Closed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// closeDrainWait bounds how long Close waits for acquisitions under way.
const closeDrainWait = 10 * time.Second

// beginAcquire counts an acquisition under way, or refuses it once Close
// has begun.
func (e *Engine) beginAcquire() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return driver.ErrClosed
	}
	e.acquiring++
	return nil
}

// beginCallLocked counts a store call that Close must wait for before it
// closes the driver, as an acquisition: an Unlock's release. Unlike
// beginAcquire it is not refused once Close has begun. e.mu must be held;
// endAcquire ends it.
func (e *Engine) beginCallLocked() { e.acquiring++ }

// awaitCalls waits until no acquisition or counted call is under way, or
// until deadline (at once if it has passed); it reports whether none is.
func (e *Engine) awaitCalls(deadline time.Time) bool {
	e.mu.Lock()
	if e.acquiring == 0 {
		e.mu.Unlock()
		return true
	}
	left := time.Until(deadline)
	if left <= 0 {
		e.mu.Unlock()
		return false
	}
	if e.drained == nil {
		e.drained = make(chan struct{})
	}
	drained := e.drained
	e.mu.Unlock()
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-drained:
		return true
	case <-t.C:
		return false
	}
}

// endAcquire ends what beginAcquire or beginCallLocked began.
func (e *Engine) endAcquire() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.acquiring--; e.acquiring == 0 && e.drained != nil {
		close(e.drained)
		e.drained = nil
	}
}

// Close releases every hold (their leases end with ErrClosed), stops
// renewals, wakes waiters with ErrClosed and closes the driver. It returns
// the first error met; calling it again does nothing.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	var holds []*Hold
	for _, h := range e.holds {
		holds = append(holds, h)
	}
	e.mu.Unlock()
	e.cancel()
	e.endWaits()
	// An acquisition woken by the cancel may still be in the store: a grant
	// that came back is released, a wait given up leaves its queue and
	// passes on a lock handed to it, through the driver, which must stay
	// open until they are done (or a lock stays taken until its TTL ends).
	// So must an Unlock's release under way: a hold it detached is not
	// among those Close releases below.
	drain := time.Now().Add(closeDrainWait) // for both waits together
	if !e.awaitCalls(drain) {
		e.log.Warn("dlock: Close went on with acquisitions still under way", "backend", e.cfg.Scheme, "after", closeDrainWait)
	}
	e.sched.Stop()
	e.cleanup.Wait()

	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range holds {
		if !e.detach(h) {
			continue
		}
		// The leases end before the store lets go, as a loss ends them
		// first: the release may be applied well before its answer comes,
		// and another client could hold the lock while this one's Done
		// was still open (an adversary pass: 100 ms with a Do still
		// running under the lease).
		n := h.storeHolds()
		h.end(driver.ErrClosed)
		err := e.drv.Release(ctx, h.Held(), n)
		e.freed(h)
		if err != nil && !errors.Is(err, driver.ErrLeaseLost) {
			errs = append(errs, e.wrap("close", h.name, err))
		}
	}
	// Unlocks that began while Close released (each of their holds is
	// released once, by whoever detached it first).
	if !e.awaitCalls(drain) {
		e.log.Warn("dlock: Close went on with unlocks still under way", "backend", e.cfg.Scheme, "after", closeDrainWait)
	}
	if err := e.drv.Close(); err != nil {
		errs = append(errs, e.wrap("close", "", err))
	}
	return errors.Join(errs...)
}

// renewed reports one hold's renewal result, from the scheduler.
func (e *Engine) renewed(h *Hold, latency time.Duration, err error) {
	if err != nil && !errors.Is(err, driver.ErrLeaseLost) {
		e.log.Debug("dlock: renewal failed; retrying", "backend", e.cfg.Scheme, "name", h.name, "err", err)
	}
	e.obs.Renewed(h, latency, err)
}

// CheckName checks a lock name against the portable rules and the driver's.
func (e *Engine) CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", driver.ErrInvalidName)
	case len(name) > e.caps.MaxNameLen:
		return fmt.Errorf("%w: %d bytes, over the backend's limit of %d", driver.ErrInvalidName, len(name), e.caps.MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: not valid UTF-8", driver.ErrInvalidName)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%w: contains a NUL byte", driver.ErrInvalidName)
	}
	if nc, ok := e.drv.(driver.NameChecker); ok {
		return nc.CheckName(name)
	}
	return nil
}

// MaxAnyTTL bounds every TTL, whatever the backend: stores count expiry in
// milliseconds or seconds and overflow long before MaxInt64.
const MaxAnyTTL = 10 * 365 * 24 * time.Hour

// CheckTTL checks a TTL against the driver's limits (with Caps.TTLNote,
// which says why), the margin a grant needs, and MaxAnyTTL.
func (e *Engine) CheckTTL(ttl time.Duration) error {
	caps := e.caps
	note := ""
	if caps.TTLNote != "" {
		note = ": " + caps.TTLNote
	}
	switch {
	case ttl <= 0:
		return fmt.Errorf("%w: %v is not positive", driver.ErrInvalidTTL, ttl)
	case caps.MinTTL > 0 && ttl < caps.MinTTL:
		return fmt.Errorf("%w: %v is shorter than the backend's minimum %v%s", driver.ErrInvalidTTL, ttl, caps.MinTTL, note)
	case caps.MaxTTL > 0 && ttl > caps.MaxTTL:
		return fmt.Errorf("%w: %v is longer than the backend's maximum %v%s", driver.ErrInvalidTTL, ttl, caps.MaxTTL, note)
	case keepalive.GrantMargin(ttl) > ttl/2:
		// No grant could be returned: each must have keepalive.GrantMargin
		// left when it arrives, and a round trip takes some of the TTL too.
		return fmt.Errorf("%w: %v is too short to be granted: a grant must arrive with %v of it left, and half of it is kept for the round trip",
			driver.ErrInvalidTTL, ttl, keepalive.GrantMargin(ttl))
	case ttl > MaxAnyTTL: // MaxInt64 said "finer than the backend's resolution"
		return fmt.Errorf("%w: %v is longer than any lease dlock keeps (%v); a lease is renewed until Unlock, so a TTL of seconds to minutes holds a lock as long",
			driver.ErrInvalidTTL, ttl, MaxAnyTTL)
	case caps.TTLResolution > 0 && ttl%caps.TTLResolution != 0:
		return fmt.Errorf("%w: %v is finer than the backend's resolution %v", driver.ErrInvalidTTL, ttl, caps.TTLResolution)
	}
	return nil
}

// Unsupported is the error of a lock kind the backend lacks.
func (e *Engine) Unsupported(what string) error {
	if e.caps.KindsNote != "" {
		return fmt.Errorf("%w: the %s backend has no %s: %s", driver.ErrUnsupported, e.cfg.Scheme, what, e.caps.KindsNote)
	}
	return fmt.Errorf("%w: the %s backend has no %s", driver.ErrUnsupported, e.cfg.Scheme, what)
}

// ForceRelease drops every hold of the lock named name of kind's family,
// whoever holds it: a Mutex's with driver.Exclusive, through the driver's
// ForceReleaser, else through its KindForceReleaser (what names the family
// in the error of a backend without it), only the holds with tokens if
// there are any.
func (e *Engine) ForceRelease(ctx context.Context, name string, kind driver.Kind, what string, tokens []uint64) error {
	if ctx == nil {
		return e.wrap("force-unlock", name, ErrNilContext)
	}
	if err := e.CheckName(name); err != nil {
		return e.wrap("force-unlock", name, err)
	}
	var err error
	switch {
	case kind == driver.Exclusive:
		fr, ok := e.drv.(driver.ForceReleaser)
		if !ok {
			return e.wrap("force-unlock", name, driver.ErrUnsupported)
		}
		if e.Closed() {
			return e.wrap("force-unlock", name, driver.ErrClosed)
		}
		if len(tokens) == 0 {
			err = fr.ForceRelease(ctx, name, 0)
		}
		for _, t := range tokens { // one holder at a time: at most one of them holds
			if t == 0 {
				continue // no hold has token 0: not "whoever holds it"
			}
			if err = fr.ForceRelease(ctx, name, t); err != nil {
				break
			}
		}
	default:
		kf, ok := e.drv.(driver.KindForceReleaser)
		if !e.caps.Supports(kind) {
			return e.wrap("force-unlock", name, e.Unsupported(what))
		}
		if !ok {
			return e.wrap("force-unlock", name, fmt.Errorf("%w: the %s backend cannot force-release its %s", driver.ErrUnsupported, e.cfg.Scheme, what))
		}
		if e.Closed() {
			return e.wrap("force-unlock", name, driver.ErrClosed)
		}
		if kind == driver.Write {
			kind = driver.Shared // the read-write lock: both of its kinds
		}
		err = kf.ForceReleaseKind(ctx, name, kind, tokens)
	}
	return e.wrap("force-unlock", name, err)
}

// Inspect describes the lock named name of kind's family: a Mutex's with
// driver.Exclusive, else through the driver's KindInspector (what names
// the family in the error of a backend without it).
func (e *Engine) Inspect(ctx context.Context, name string, kind driver.Kind, what string) (driver.Info, error) {
	if ctx == nil {
		return driver.Info{}, e.wrap("inspect", name, ErrNilContext)
	}
	if err := e.CheckName(name); err != nil {
		return driver.Info{}, e.wrap("inspect", name, err)
	}
	ki, ok := e.drv.(driver.KindInspector)
	if kind != driver.Exclusive && (!ok || !e.caps.Supports(kind)) {
		return driver.Info{}, e.wrap("inspect", name, e.Unsupported(what))
	}
	if e.Closed() {
		return driver.Info{}, e.wrap("inspect", name, driver.ErrClosed)
	}
	var di driver.Info
	var err error
	if kind == driver.Exclusive {
		di, err = e.drv.Inspect(ctx, name)
	} else {
		di, err = ki.InspectKind(ctx, name, kind)
	}
	if err != nil {
		return driver.Info{}, e.wrap("inspect", name, err)
	}
	return di, nil
}
