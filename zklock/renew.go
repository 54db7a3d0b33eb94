package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// renewInFlight bounds the goroutines one Renew call runs checks from.
const renewInFlight = 64

// existsCheck is one check that a holder's node exists.
type existsCheck struct {
	*pending
	ok   bool     // set when done is closed
	stat *zk.Stat // set when done is closed
}

// Renew checks that each holder's node still exists, with up to
// renewInFlight checks in flight on the connection at once (10,000 leases
// checked one by one would outlast the renewal interval). The session
// keeps the nodes: a hold is valid until the session could expire on the
// server, session_timeout after the server last heard from it (counted
// from the sending of the last request answered in the session), less the
// driver's slack.
//
// Renew returns when ctx ends, with the checks still unanswered reported
// as uncertain errors. A check left in flight is not sent again: the next
// Renew waits for the same one, so a cut connection costs one goroutine per
// lease, which go-zookeeper ends when it drops the connection.
func (d *zkDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	began := time.Now()
	res := make([]driver.RenewResult, len(batch))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(len(batch), renewInFlight) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res[i] = d.check(ctx, began, batch[i])
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

// checkOf returns the lease's check in flight, or sends a new one unless
// ctx has ended (then nil).
func (d *zkDriver) checkOf(ctx context.Context, l *Lease) *existsCheck {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.check != nil {
		select {
		case <-l.check.done:
		default:
			return l.check
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	c := &existsCheck{}
	c.pending = d.start(l.sess, func() (err error) { c.ok, c.stat, err = d.conn.Exists(l.Path); return err })
	l.check = c
	return c
}

func (d *zkDriver) check(ctx context.Context, began time.Time, h driver.Held) driver.RenewResult {
	l, ok := h.Handle.(*Lease)
	if !ok {
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: %w", h.Name, dlock.ErrLeaseLost)}
	}
	s := l.sess
	gone := func(why string) driver.RenewResult {
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: %w: %s", h.Name, dlock.ErrLeaseLost, why)}
	}
	if s.isEnded() {
		return gone("the session may have expired")
	}
	c := d.checkOf(ctx, l)
	if c == nil {
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: not sent: %w", h.Name, ctx.Err())}
	}
	err := c.wait(ctx)
	switch {
	case errors.Is(err, errNoReply):
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: %w", h.Name, err)}
	case errors.Is(err, zk.ErrSessionExpired) || !c.inSession && d.conn.SessionID() != s.id:
		s.end() // go-zookeeper has moved on to another session (or none)
		return gone("the session expired")
	case err != nil:
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: %w", h.Name, err)}
	case !c.inSession:
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: the check was not answered in the lease's session", h.Name)}
	case !c.ok || c.stat.Czxid != l.Czxid || c.stat.EphemeralOwner != s.id:
		return gone(fmt.Sprintf("the node %s is gone", l.Path))
	}
	v := d.validUntil(s).Sub(began) // began is no earlier than dlock counts from
	if v <= 0 {
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: the server has not answered since %v", h.Name, s.lastHeard())}
	}
	return driver.RenewResult{Validity: min(h.TTL, v)}
}
