package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// How a waiter's subscription to one node is made: each try has a second
// for the node to confirm it; one that failed for want of an answer is
// tried again, from resubscribeMin, doubling up to resubscribeMax.
const (
	subscribeTimeout = time.Second
	resubscribeMin   = 250 * time.Millisecond
	resubscribeMax   = 5 * time.Second
)

// Subscribe listens for releases of name on every node. At least one node
// must confirm within a second. A node that refuses (a reply error: no
// right to the channel, say) is left out. A node that does not answer in
// time (slow, or cut off for a moment) is tried again in the background
// until the subscription closes: left out for the whole wait, as it was,
// its announcements were missed, and a waiter that heard only that node's
// (the cancel of a split vote's hold there) slept out a TTL, up to 5 s, on
// a free lock.
func (d *redlockDriver) Subscribe(ctx context.Context, name string) (driver.Subscription, error) {
	ch := d.nodes[0].Channel(name)
	type answer struct {
		i   int
		ps  *redis.PubSub
		err error
	}
	answers := make(chan answer, len(d.nodes))
	sctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	defer cancel()
	for i, n := range d.nodes {
		go func() {
			ps, err := subscribeNode(sctx, n, ch)
			answers <- answer{i, ps, err}
		}()
	}
	s := newSubscription()
	errs := make([]error, len(d.nodes))
	for got := 0; got < len(d.nodes); got++ {
		select {
		case a := <-answers:
			if errs[a.i] = a.err; a.err == nil {
				s.add(a.ps)
			}
		case <-ctx.Done():
			// go-redis heeds a context's deadline on its sockets, not its
			// cancellation: the answers still to come are closed as they
			// come, within the second, without holding up the caller.
			go func(left int) {
				for range left {
					if a := <-answers; a.ps != nil {
						_ = a.ps.Close()
					}
				}
			}(len(d.nodes) - got)
			_ = s.Close()
			return nil, ctx.Err()
		}
	}
	if s.count() == 0 {
		_ = s.Close()
		if err := d.refused(errs); err != nil {
			return nil, err
		}
		return nil, errors.New("redlock: subscribe: no node answered")
	}
	for i, err := range errs {
		var re redis.Error
		if err != nil && !errors.As(err, &re) {
			go s.retry(d.nodes[i], ch)
		}
	}
	return s, nil
}

// subscribeNode subscribes to ch on n and waits for n to confirm it; on
// an error it closes what it opened.
func subscribeNode(ctx context.Context, n *redisnode.Node, ch string) (*redis.PubSub, error) {
	ps := n.Client().Subscribe(ctx, ch)
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		_ = ps.Close()
		return nil, err
	}
	return ps, nil
}

// subscription is a waiter's subscription to every node that confirmed
// it; C receives (coalesced) whatever any of them announces.
type subscription struct {
	c      chan struct{}
	ctx    context.Context // ends at Close: the retries give up
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	pss    []*redis.PubSub
	wg     sync.WaitGroup // the forwarders of pss
}

func newSubscription() *subscription {
	ctx, cancel := context.WithCancel(context.Background())
	return &subscription{c: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

// add forwards ps's messages to C; false, with ps left to the caller, if
// the subscription has closed.
func (s *subscription) add(ps *redis.PubSub) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.pss = append(s.pss, ps)
	msgs := ps.Channel()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for range msgs {
			select {
			case s.c <- struct{}{}:
			default:
			}
		}
	}()
	return true
}

func (s *subscription) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pss)
}

// retry subscribes to ch on n again, with backoff, until n confirms, n
// refuses, or the subscription closes. Close does not wait for it: a try
// under way when it closes ends within its second (go-redis heeds only
// the deadline), and a Lock that waited must not return that much later.
// Each try closes what it opened, so nothing is left once it ends.
func (s *subscription) retry(n *redisnode.Node, ch string) {
	t := time.NewTimer(resubscribeMin)
	defer t.Stop()
	for wait := resubscribeMin; ; {
		select {
		case <-t.C:
		case <-s.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(s.ctx, subscribeTimeout)
		ps, err := subscribeNode(ctx, n, ch)
		cancel()
		var re redis.Error
		switch {
		case err == nil:
			if !s.add(ps) {
				_ = ps.Close()
			}
			return
		case errors.As(err, &re):
			return
		}
		wait = min(wait*2, resubscribeMax)
		t.Reset(wait)
	}
}

func (s *subscription) C() <-chan struct{} { return s.c }

func (s *subscription) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	pss := s.pss
	s.mu.Unlock()
	for _, ps := range pss {
		_ = ps.Close()
	}
	s.wg.Wait()
	return nil
}
