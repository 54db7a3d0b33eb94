package dlock

import (
	"context"
	"log/slog"
	"time"
)

// DefaultTTL is the lease TTL of a Mutex made without WithTTL. Leases are
// renewed every TTL/3 while held, like Redisson's watchdog.
const DefaultTTL = 30 * time.Second

// Option configures a Mutex.
type Option func(*mutexOptions)

type mutexOptions struct {
	ttl       time.Duration
	label     string // "" : the client's default, "host:pid"
	owner     string // "" unless WithOwner: each Lock is then its own holder
	ownerSet  bool
	noRenewal bool
	fresh     bool // owner was made for this one call (a Campaign's candidate)
}

// WithTTL sets the lease TTL: how long the lock outlives a holder that stops
// renewing it (a crashed process). The default is DefaultTTL. A TTL over
// ten years, or one the backend cannot keep, is refused with ErrInvalidTTL.
func WithTTL(d time.Duration) Option { return func(o *mutexOptions) { o.ttl = d } }

// WithoutRenewal makes leases fixed: they are not renewed and end at their
// TTL, when Done closes and Err wraps ErrLeaseLost.
func WithoutRenewal() Option { return func(o *mutexOptions) { o.noRenewal = true } }

// WithOwner makes every Lock and TryLock of the Mutex lock as owner id, so
// that they share one hold: an owner that holds the lock and locks it again
// gets it at once, and the lock is released when every hold is unlocked.
// With backends that keep hold counts in the store (Redis, Redlock, mem,
// Memcached and the SQL table modes) this works across clients and
// processes that use the same id, like the host and thread columns of a
// re-entrant MySQL lock table; elsewhere, within one client.
//
// Without WithOwner, every Lock and TryLock call is a holder of its own
// (a fresh random 128-bit owner id), so goroutines sharing a Mutex exclude
// each other as with sync.Mutex; re-entry then happens only through a ctx
// that carries a live lease of the same lock (see ContextWithLease and Do).
// An empty id is refused with ErrInvalidOwner.
func WithOwner(id string) Option {
	return func(o *mutexOptions) { o.owner, o.ownerSet = id, true }
}

// WithLabel sets the holder label stored with the Mutex's holds, where the
// store has room for it, and shown by Client.Inspect and `dlock inspect`, so
// operators can tell which host or process holds a lock. The default is
// "host:pid" of the process. Labels are for people: ownership is by owner id.
func WithLabel(label string) Option { return func(o *mutexOptions) { o.label = label } }

// ClientOption configures a Client.
type ClientOption func(*clientOptions)

type clientOptions struct {
	logger *slog.Logger
	hooks  Hooks
}

// WithLogger sets the logger for warnings such as lost leases. The default is
// slog.Default().
func WithLogger(l *slog.Logger) ClientOption { return func(o *clientOptions) { o.logger = l } }

// Event describes one lock event, for hooks.
type Event struct {
	Backend string        // the backend's URL scheme
	Name    string        // the lock name
	Kind    string        // the kind of hold: "exclusive" (a Mutex), "shared" or "write" (an RWMutex), "permit" (a Semaphore)
	Token   uint64        // the lease's fencing token; 0 when refused
	Wait    time.Duration // Acquired, Refused: how long the call waited
	Held    time.Duration // Released, Lost: how long the hold lasted
	Latency time.Duration // Renewed: the renewal's round trip
	Err     error         // Refused: why; Renewed: a failed renewal's error; Lost: the cause
}

// Call describes a Lock, TryLock, Unlock or Extend call, for Hooks.Call.
type Call struct {
	Op      string // "lock", "trylock", "unlock" or "extend"
	Backend string // the backend's URL scheme
	Name    string // the lock name
	Kind    string // the kind of hold: "exclusive" (a Mutex), "shared" or "write" (an RWMutex), "permit" (a Semaphore)
	Token   uint64 // Unlock, Extend: the lease's fencing token; 0 for Lock and TryLock
}

// newEvent is the one constructor of hook events: the event about a hold
// of kind on c's lock name with token (0 when refused), after a wait of
// wait (0 when not a Lock's), with err.
func newEvent(c *Client, name string, kind Kind, token uint64, wait time.Duration, err error) Event {
	return Event{Backend: c.scheme, Name: name, Kind: kind.String(), Token: token, Wait: wait, Err: err}
}

// event is the hook event about h, lasting since it was acquired.
func (h *hold) event(err error) Event {
	e := newEvent(h.c, h.name, h.kind, h.token, 0, err)
	e.Held = time.Since(h.acquired)
	return e
}

// Hooks are called on lock events, for metrics, traces and logs. Each field
// may be nil. Hooks must return quickly: they run on the goroutine that saw
// the event. The ctx of Acquired and Refused is the Lock call's, that of
// Released the Unlock call's; Renewed and Lost get a background context
// (they come from the client's scheduler).
type Hooks struct {
	// Acquired: a Lock or TryLock was granted a new hold (not a re-entry).
	Acquired func(ctx context.Context, e Event)
	// Refused: a TryLock found the lock held, or a Lock's wait ended
	// without it (contention).
	Refused func(ctx context.Context, e Event)
	// Released: a lease was unlocked.
	Released func(ctx context.Context, e Event)
	// Renewed: one hold's renewal came back, confirmed or failed (e.Err).
	Renewed func(ctx context.Context, e Event)
	// Lost: a lease was lost; e.Err wraps ErrLeaseLost.
	Lost func(ctx context.Context, e Event)
	// Call: a Lock, TryLock, Unlock or Extend call begins (for traces).
	// The ctx it returns is the one the call goes on with, and is passed to
	// the Acquired, Refused and Released hooks the call runs; end is called
	// when the call returns, with the fencing token it got or had (0 if
	// none) and its error. Not called for a nil ctx.
	Call func(ctx context.Context, c Call) (_ context.Context, end func(token uint64, err error))
}

// WithHooks sets event hooks.
func WithHooks(h Hooks) ClientOption { return func(o *clientOptions) { o.hooks = h } }
