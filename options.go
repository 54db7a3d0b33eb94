package dlock

import (
	"log/slog"
	"time"

	"github.com/dlock/dlock/internal/core"
)

// DefaultTTL is the lease TTL of a Mutex made without WithTTL. Leases are
// renewed every TTL/3 while held, like Redisson's watchdog.
const DefaultTTL = 30 * time.Second

// Option configures a Mutex.
type Option func(*mutexOptions)

// mutexOptions are the engine's options of an acquisition (Owner is ""
// unless WithOwner: each Lock is then its own holder; Label "" is the
// client's default, "host:pid"), and what the root package checks of them.
type mutexOptions struct {
	core.Opts
	ownerSet bool
}

// WithTTL sets the lease TTL: how long the lock outlives a holder that stops
// renewing it (a crashed process). The default is DefaultTTL. A TTL over
// ten years, or one the backend cannot keep, is refused with ErrInvalidTTL.
func WithTTL(d time.Duration) Option { return func(o *mutexOptions) { o.TTL = d } }

// WithoutRenewal makes leases fixed: they are not renewed and end at their
// TTL, when Done closes and Err wraps ErrLeaseLost.
// The leases of one hold share its renewal: a re-entry (WithOwner, or a ctx
// carrying a lease) that differs from its hold in this option fails with
// ErrRenewalMismatch.
func WithoutRenewal() Option { return func(o *mutexOptions) { o.NoRenewal = true } }

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
	return func(o *mutexOptions) { o.Owner, o.ownerSet = id, true }
}

// WithLabel sets the holder label stored with the Mutex's holds, where the
// store has room for it, and shown by Client.Inspect and `dlock inspect`, so
// operators can tell which host or process holds a lock. The default is
// "host:pid" of the process. Labels are for people: ownership is by owner id.
func WithLabel(label string) Option { return func(o *mutexOptions) { o.Label = label } }

// ClientOption configures a Client.
type ClientOption func(*clientOptions)

type clientOptions struct {
	logger *slog.Logger
	hooks  Hooks
}

// WithLogger sets the logger for warnings such as lost leases. The default is
// slog.Default().
func WithLogger(l *slog.Logger) ClientOption { return func(o *clientOptions) { o.logger = l } }

// WithHooks sets event hooks.
func WithHooks(h Hooks) ClientOption { return func(o *clientOptions) { o.hooks = h } }
