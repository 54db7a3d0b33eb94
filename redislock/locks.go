package redislock

import (
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/redisnode"
)

// locks remembers, per lock name and kind of hold, what a client would
// otherwise make again on every Lock and Unlock: the lock's keys (cut from
// one string and boxed once for the scripts' calls, see redisnode.Keys), and
// when the client last added the lock to List's index (see indexRefresh).
// A grant's handle is its lock's entry, so Unlock and renewals find the
// keys without a lookup. It holds at most indexCacheMax entries, and starts
// again empty when full: an entry still in a handle stays valid, as keys
// never change.
type locks struct {
	mu sync.Mutex
	m  map[lockID]*lockEntry
}

type lockID struct {
	name string
	kind driver.Kind
}

type lockEntry struct {
	keys    redisnode.Keys // fixed when made
	indexed time.Time      // when this client last added the lock to the index; guarded by locks.mu
}

// lock returns the entry of the lock name for holds of kind, making it if
// it is not there.
func (d *redisDriver) lock(name string, kind driver.Kind) *lockEntry {
	id := lockID{name, kind}
	d.locks.mu.Lock()
	defer d.locks.mu.Unlock()
	if e := d.locks.m[id]; e != nil {
		return e
	}
	if d.locks.m == nil || len(d.locks.m) >= indexCacheMax {
		d.locks.m = map[lockID]*lockEntry{}
	}
	e := &lockEntry{keys: redisnode.NewKindKeys(d.prefix, name, kind)}
	d.locks.m[id] = e
	return e
}
