package etcdlock

import (
	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// PauseKeepAlives stops the refreshes of c's current session leases, as a
// paused process's would stop: etcd can expire them (or a test revoke them)
// without c knowing. Sessions c starts later are not paused.
func PauseKeepAlives(c *dlock.Client) {
	var d *etcdDriver
	if !c.As(&d) {
		panic("etcdlock: not an etcd client")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.sessions {
		s.paused.Store(true)
	}
}

// DriverOf returns c's driver, for tests that call it directly.
func DriverOf(c *dlock.Client) driver.Driver {
	var d *etcdDriver
	if !c.As(&d) {
		panic("etcdlock: not an etcd client")
	}
	return d
}

// PageSize is how many keys one read of a lock's queue takes.
const PageSize = pageSize

// SetDropHook makes f run before each attempt to delete a contender's
// given-up key (see dropHook); nil removes it.
func SetDropHook(f func(background bool) error) {
	if f == nil {
		dropHook.Store(nil)
		return
	}
	dropHook.Store(&f)
}

// KindPools returns how many pools of read-write lock and semaphore key
// names c keeps (kindkeys.go).
func KindPools(c *dlock.Client) int {
	var d *etcdDriver
	if !c.As(&d) {
		panic("etcdlock: not an etcd client")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.kindKeys)
}
