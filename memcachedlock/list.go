package memcachedlock

import (
	"context"
	"fmt"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// List implements driver.Lister by refusing: memcached has no way to
// enumerate its keys (no SCAN; lru_crawler metadump is debug output that
// may skip keys and is often disabled), so a list would be a guess.
func (d *mcDriver) List(context.Context, string) ([]driver.Info, error) {
	return nil, fmt.Errorf("memcachedlock: %w: memcached cannot enumerate its keys; inspect a lock by name", dlock.ErrUnsupported)
}
