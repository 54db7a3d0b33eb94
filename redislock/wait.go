package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"

	"github.com/dlock/dlock/internal/keepalive"
)

// pauseHook, set only by tests (export_test.go), runs where a waiter is
// about to refresh its place: a test blocks it there to pause the waiter as
// SIGSTOP or a long GC pause would, while its handoffs still arrive.
var pauseHook atomic.Pointer[func(name string)]

// wait queues a request for the lock and blocks until the store grants it
// to the request, ctx ends, or an attempt finds it free and the request at
// the queue's head. It costs one round trip when the lock is free.
//
// A handoff message is only a wake-up: it is a claim about the past, and a
// process paused after it arrived (SIGSTOP, a long GC pause) reads it
// seconds later, when the handed lock may have expired and gone to another
// waiter. So every grant wait returns is proven by an acquire script that
// found the lock held by this request (or granted it), and its validity
// counts from that script's send time. Every way out that is not a grant
// takes the request out of the queue and passes on a lock handed to it.
func (d *redisDriver) wait(ctx context.Context, e *lockEntry, r driver.Request) (driver.Grant, error) {
	req := d.node.NewRequest()
	granted := false // or nothing to undo
	defer func() {
		if !granted { // leave the queue; pass the lock on if it was just handed to us
			d.cancel(ctx, e.keys, r.Owner, req)
		}
	}()
	g, err := d.try(ctx, e, r, req, d.hub.channel) // Since: when Acquire began, just before
	if err != nil || g.Acquired {
		granted = err == nil || errors.Is(err, redisnode.ErrUnsettled) // the latter was never sent
		return g, err
	}
	handed, err := d.hub.await(ctx, req)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("redislock: subscribe: %w", err)
	}
	defer d.hub.forget(req)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		if f := pauseHook.Load(); f != nil {
			(*f)(r.Name)
		}
		// Refresh our place. This is also what proves a handoff, whether
		// its message came or was lost (made before the subscription was in
		// place, or dropped with the pub/sub connection): the script finds
		// the lock held by this request and extends it to the TTL.
		sent := time.Now()
		g, err = d.try(ctx, e, r, req, d.hub.channel)
		if err == nil && g.Acquired {
			granted = true
			g.Since = sent
			return g, nil
		}
		if err != nil && (ctx.Err() != nil || errors.Is(err, driver.ErrLimitMismatch)) {
			return driver.Grant{}, err
		}
		next := keepalive.RenewInterval(redisnode.WaiterTTL) // refresh the waiter's place
		if g.Retry > 0 && g.Retry < next {                   // the holder's lease ends first
			next = g.Retry + time.Millisecond
		}
		timer.Reset(next)
		select {
		case <-handed: // refresh now: it finds the lock if it is still ours
		case <-timer.C:
		case <-ctx.Done():
			return driver.Grant{}, ctx.Err()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// cancel undoes request req of owner, best effort, for a caller that gives
// up on it (ctx ended, or its reply was lost): it leaves the queue, and if
// req was the last change to the hold (a handoff to it, a grant or a
// re-entry whose reply was lost), that hold is dropped and a freed lock
// passed on. It is bounded by cleanupTimeout, since ctx may have ended; a
// cancel that fails is sent again before the owner's next call on the lock,
// and meanwhile a queue place not refreshed expires by itself.
func (d *redisDriver) cancel(ctx context.Context, k redisnode.Keys, owner, req string) {
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer stop()
	if err := d.node.Cancel(cctx, k, owner, req, false); err != nil {
		d.log.Debug("redislock: cancel of a request failed; it is sent again before the owner's next call",
			"request", req, "err", err)
	}
}

// hub delivers handoffs to the waiters of a client. Each client has a
// channel of its own, and a queued request names it, so a release wakes
// only the client of the waiter it hands the lock to, and there only that
// waiter: never a herd, across processes or within one. The client
// subscribes on one pub/sub connection when it first waits, and stays
// subscribed until it closes.
type hub struct {
	rdb     redis.UniversalClient
	channel string // this client's: "h<request> <token>" messages, wake-ups only

	mu      sync.Mutex
	ps      *redis.PubSub
	ready   chan struct{} // closed when the server confirmed the subscription
	once    sync.Once
	waiters map[string]chan struct{}
	done    chan struct{}
	closed  bool
}

func newHub(rdb redis.UniversalClient, prefix string) *hub {
	id := dlock.NewOwnerID()
	return &hub{rdb: rdb, channel: prefix + ":handoffs:" + id,
		waiters: map[string]chan struct{}{}, ready: make(chan struct{})}
}

// subscribeWait bounds how long a waiter waits for its client's
// subscription to be confirmed before it starts refreshing its place (which
// finds a handoff whether its message came or not). A subscription whose
// node is stopped, or dead while the client's map of a Cluster's slots
// still names it, is never confirmed: the first Lock to wait on such a
// client waited until its ctx ended, its place in the queue not refreshed
// (an adversary pass), and the lock handed to it went unclaimed.
const subscribeWait = time.Second

// await returns the channel on which a handoff to req is announced, once the
// server has confirmed the client's subscription or subscribeWait has
// passed. An announcement only says that the lock was handed to req at some
// time: the waiter checks with the store whether it still holds it.
func (h *hub) await(ctx context.Context, req string) (<-chan struct{}, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, dlock.ErrClosed
	}
	if h.ps == nil {
		h.ps = h.rdb.Subscribe(context.WithoutCancel(ctx), h.channel)
		h.done = make(chan struct{})
		go h.dispatch(h.ps.ChannelWithSubscriptions(redis.WithChannelSize(1000)))
	}
	w := make(chan struct{}, 1)
	h.waiters[req] = w
	h.mu.Unlock()
	select {
	case <-h.ready: // confirmed already: the common case makes no timer
		return w, nil
	default:
	}
	t := time.NewTimer(subscribeWait)
	defer t.Stop()
	select {
	case <-h.ready:
		return w, nil
	case <-t.C: // not confirmed yet: the caller refreshes its place meanwhile
		return w, nil
	case <-ctx.Done():
		h.forget(req)
		return nil, ctx.Err()
	}
}

func (h *hub) forget(req string) {
	h.mu.Lock()
	delete(h.waiters, req)
	h.mu.Unlock()
}

func (h *hub) dispatch(in <-chan any) {
	defer close(h.done)
	for m := range in {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.once.Do(func() { close(h.ready) })
			}
		case *redis.Message:
			req, _, ok := strings.Cut(strings.TrimPrefix(m.Payload, "h"), " ")
			if !ok {
				continue
			}
			h.mu.Lock()
			if w := h.waiters[req]; w != nil {
				select {
				case w <- struct{}{}:
				default:
				}
			}
			h.mu.Unlock()
		}
	}
}

func (h *hub) close() {
	h.mu.Lock()
	ps, done := h.ps, h.done
	h.ps = nil
	h.waiters = map[string]chan struct{}{}
	h.closed = true
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-done
	}
}
