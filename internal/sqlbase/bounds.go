package sqlbase

import (
	"math"
	"time"

	"github.com/dlock/dlock/internal/keepalive"
)

// The row and session modes hold a lock as long as the server keeps the
// holding connection's session. A holder cut off without a close (a network
// that drops packets, a frozen host) would keep it for as long as the server
// believes the connection alive: hours with default keepalives. So each
// holding session is bounded by its lease: the server ends it when no
// statement has come for a TTL. The holder's renewal (a statement on the
// connection every TTL/3) keeps it alive; a holder that cannot renew has
// lost its lease by then anyway, since its lease counts from the send time
// of its last statement, which the server received before it started
// counting.

// IdleMillis is the idle timeout in milliseconds for a lease of ttl (at
// least 1, at most what a 32-bit setting holds).
func IdleMillis(ttl time.Duration) int64 {
	return clamp(ceilDiv(ttl, time.Millisecond), 1, math.MaxInt32)
}

// MaxTxIdle caps the idle bound of table mode's short transactions (an
// acquire of a read, write or permit; its release; a renewal batch). Such a
// transaction locks rows that other clients of the lock wait on (a lock's
// state row), so a client paused or cut off inside one keeps all of them
// waiting until the server ends its session. Bounded by the TTL alone, that
// was the requester's own TTL: 30 s at the default, an hour for a lease of
// an hour. A client that is merely slow needs far less between two of its
// statements (one client turn), and one whose transaction the server ends
// sees a store error (a waiting Lock tries again).
const MaxTxIdle = 5 * time.Second

// TxIdle is the idle bound of a table-mode transaction for a lease of ttl:
// the TTL, at most MaxTxIdle. (A holding session of row or session mode is
// the lease itself, and keeps the TTL.)
func TxIdle(ttl time.Duration) time.Duration { return min(ttl, MaxTxIdle) }

// IdleSeconds is the idle timeout in whole seconds for a lease of ttl,
// rounded up so the server never ends a session before its lease ends.
func IdleSeconds(ttl time.Duration) int64 {
	return clamp(ceilDiv(ttl, time.Second), 1, 365*24*3600)
}

// Keepalive is how TCP keepalives and the TCP user timeout are set on a
// holding connection where the server lets a session set them, so that the
// server also notices a dead peer while the session waits or sends: probes
// after Idle without traffic, every Interval, and the connection is dropped
// once data or probes go unacknowledged for UserTimeout.
type Keepalive struct {
	Idle, Interval, UserTimeout time.Duration
	Count                       int
}

// KeepaliveFor returns the keepalive settings for a lease of ttl: probes
// from the renewal interval, keepalive.RenewInterval (whole seconds, at least 1), dropped after about a TTL (at
// least a second, so one lost segment does not end a short lease).
func KeepaliveFor(ttl time.Duration) Keepalive {
	step := time.Duration(clamp(ceilDiv(keepalive.RenewInterval(ttl), time.Second), 1, 3600)) * time.Second
	return Keepalive{Idle: step, Interval: step, Count: 3, UserTimeout: max(ttl, time.Second)}
}

func ceilDiv(d, unit time.Duration) int64 { return int64((d + unit - 1) / unit) }

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
