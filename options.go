package dlock

import (
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
	owner     string
	noRenewal bool
}

// WithTTL sets the lease TTL: how long the lock outlives a holder that stops
// renewing it (a crashed process). The default is DefaultTTL.
func WithTTL(d time.Duration) Option { return func(o *mutexOptions) { o.ttl = d } }

// WithoutRenewal makes leases fixed: they are not renewed and end at their
// TTL, when Done closes and Err wraps ErrLeaseLost.
func WithoutRenewal() Option { return func(o *mutexOptions) { o.noRenewal = true } }

// WithOwner sets the owner id. An owner that holds a lock and locks it again
// gets it at once, and the lock is released when every hold is unlocked; with
// backends that keep hold counts in the store this works across processes
// that share an owner id. The default is a random 128-bit id per Mutex.
func WithOwner(id string) Option { return func(o *mutexOptions) { o.owner = id } }

// ClientOption configures a Client.
type ClientOption func(*clientOptions)

type clientOptions struct {
	logger *slog.Logger
	hooks  Hooks
}

// WithLogger sets the logger for warnings such as lost leases. The default is
// slog.Default().
func WithLogger(l *slog.Logger) ClientOption { return func(o *clientOptions) { o.logger = l } }

// Hooks are called on lock events, for metrics. Each field may be nil. Hooks
// must return quickly: they run on the goroutine that saw the event.
type Hooks struct {
	// Acquired is called when a Lock or TryLock is granted, with the time it
	// waited.
	Acquired func(name string, token uint64, waited time.Duration)
	// Released is called when a lease is unlocked.
	Released func(name string, token uint64, held time.Duration)
	// Lost is called when a lease is lost.
	Lost func(name string, token uint64, err error)
}

// WithHooks sets event hooks.
func WithHooks(h Hooks) ClientOption { return func(o *clientOptions) { o.hooks = h } }
