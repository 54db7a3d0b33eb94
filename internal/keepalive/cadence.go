// Package keepalive is dlock's renewal machinery: the cadence every
// keepalive in the tree follows (RenewInterval and the margins), and the
// Scheduler that renews a client's holds from one timer and declares them
// lost a margin before they could expire.
//
// The cadence lives here alone. The client's scheduler uses it, and so do
// the backends whose store sessions keep themselves alive (etcdlock's
// lease, the SQL backends' connection keepalives, redislock's waiting
// records): changing it here moves them all.
package keepalive

import "time"

// RenewInterval is how often a hold (or a store session) of TTL ttl is
// renewed: three chances before it could expire, like Redisson's watchdog.
func RenewInterval(ttl time.Duration) time.Duration { return ttl / 3 }

// LossMargin is how long before its expiry a hold that could not be renewed
// is declared lost: room for clock drift and scheduling delay.
func LossMargin(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// GrantMargin is the least validity a grant must have left when Lock would
// return it: the loss margin, plus a tenth of the TTL (at most a second)
// for the caller to act and for the first renewal to be confirmed. A grant
// with less is released instead.
func GrantMargin(ttl time.Duration) time.Duration {
	return LossMargin(ttl) + min(ttl/10, time.Second)
}

// SessionEnded reports whether a grant's session-loss channel is closed.
func SessionEnded(lost <-chan struct{}) bool {
	if lost == nil {
		return false
	}
	select {
	case <-lost:
		return true
	default:
		return false
	}
}
