package redislock

import (
	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// DriverOf returns c's driver, for the conformance suite's driver-level
// tests.
func DriverOf(c *dlock.Client) driver.Driver {
	var d *redisDriver
	if !c.As(&d) {
		panic("redislock: not a redis client")
	}
	return d
}

// SetPauseHook makes f run in every waiter of this process before it
// refreshes its place in the queue (see pauseHook); nil removes it.
func SetPauseHook(f func(name string)) {
	if f == nil {
		pauseHook.Store(nil)
		return
	}
	pauseHook.Store(&f)
}

// HandoffChannel returns the pub/sub channel c's waiters are woken on.
func HandoffChannel(c *dlock.Client) string {
	var d *redisDriver
	if !c.As(&d) {
		panic("redislock: not a redis client")
	}
	return d.hub.channel
}
