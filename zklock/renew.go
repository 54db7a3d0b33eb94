package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// renewInFlight bounds the node checks one renewal tick has outstanding.
const renewInFlight = 64

// Renew checks that each holder's node still exists, with up to
// renewInFlight checks in flight on the connection at once (10,000 leases
// checked one by one would outlast the renewal interval). The session
// keeps the nodes; a hold is valid for the session timeout from the check's
// sending.
func (d *zkDriver) Renew(_ context.Context, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(len(batch), renewInFlight) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res[i] = d.check(batch[i])
			}
		}()
	}
	for i := range batch {
		next <- i
	}
	close(next)
	wg.Wait()
	return res
}

func (d *zkDriver) check(h driver.Held) driver.RenewResult {
	l := h.Handle.(*Lease)
	ok, stat, err := d.conn.Exists(l.Path)
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return driver.RenewResult{Err: fmt.Errorf("zklock: %w: session expired", dlock.ErrLeaseLost)}
	case err != nil:
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew: %w", err)}
	case !ok || stat.Czxid != l.Czxid:
		return driver.RenewResult{Err: fmt.Errorf("zklock: %w: the node %s is gone", dlock.ErrLeaseLost, l.Path)}
	}
	return driver.RenewResult{Validity: min(h.TTL, d.timeout)} // counted by dlock from this tick's start, before sent
}
