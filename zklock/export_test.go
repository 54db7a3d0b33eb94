package zklock

import (
	"context"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// ChrootMarker is the node dlock keeps in a chroot.
const ChrootMarker = chrootMarker

func driverOf(c *dlock.Client) *zkDriver {
	var d *zkDriver
	if !c.As(&d) {
		panic("not a zklock client")
	}
	return d
}

// ProvedTokens returns how many tokens c's driver took from the parent's
// pzxid in createAndRead instead of reading the node.
func ProvedTokens(c *dlock.Client) int64 { return driverOf(c).provedTokens.Load() }

// StatTokens returns how many tokens c's driver took from the parent stat
// its create's transaction returned.
func StatTokens(c *dlock.Client) int64 { return driverOf(c).statTokens.Load() }

// DisableMulti makes c's driver create its nodes alone, as when the parent
// write is refused.
func DisableMulti(c *dlock.Client) { driverOf(c).noMulti.Store(true) }

// SessionLost returns the channel closed when the session l's node lives in
// may be gone (its Grant.Lost).
func SessionLost(l *Lease) <-chan struct{} { return l.sess.lost }

// Renew runs c's driver's Renew for the lease l alone, with ctx.
func Renew(ctx context.Context, c *dlock.Client, l *dlock.Lease) error {
	var zl *Lease
	if !l.As(&zl) {
		panic("not a zklock lease")
	}
	res := driverOf(c).Renew(ctx, []driver.Held{{Name: l.Name(), TTL: time.Minute, Token: l.Token(), Handle: zl}})
	return res[0].Err
}
