package redlock

import (
	"context"
	"fmt"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// List implements driver.Lister by refusing: each Redlock node keeps its own
// copy of a lock, and the nodes' lists may disagree (a node that restarted,
// one a client could not reach), so no one list is true. List a node with
// its redis:// URL, or inspect a lock by name (Inspect asks them all).
func (d *redlockDriver) List(context.Context, string) ([]driver.Info, error) {
	return nil, fmt.Errorf("redlock: %w: each node keeps its own copy of a lock and their lists may disagree; list one node with its redis:// URL, or inspect a lock by name", dlock.ErrUnsupported)
}
