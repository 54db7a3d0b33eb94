package redislock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// wait queues a request for the lock and blocks until the lock is handed to
// it, ctx ends, or an attempt finds it free and the request at the queue's
// head. It costs one round trip when the lock is free.
func (d *redisDriver) wait(ctx context.Context, k keys, r driver.Request) (driver.Grant, error) {
	req := d.node.newRequest()
	sent := time.Now()
	g, err := d.try(ctx, k, r, req, d.hub.channel)
	if err != nil || g.Acquired {
		return g, err
	}
	granted := false
	defer func() {
		if !granted { // leave the queue; pass the lock on if it was just handed to us
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = cancelScript.Run(cctx, d.rdb, k.all(), req).Err()
		}
	}()
	handed, err := d.hub.await(ctx, req)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("redislock: subscribe: %w", err)
	}
	defer d.hub.forget(req)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		// Refresh our place; this also finds a handoff made before the
		// subscription was in place.
		sent = time.Now()
		g, err = d.try(ctx, k, r, req, d.hub.channel)
		if err == nil && g.Acquired {
			granted = true
			g.Since = sent
			return g, nil
		}
		if err != nil && ctx.Err() != nil {
			return driver.Grant{}, err
		}
		next := keepAlive
		if g.Retry > 0 && g.Retry < next { // the holder's lease ends first
			next = g.Retry + time.Millisecond
		}
		timer.Reset(next)
		select {
		case token := <-handed:
			granted = true
			return driver.Grant{Acquired: true, Token: token, Holds: 1,
				Validity: min(r.TTL, handoffTTL), Since: sent, Handle: k}, nil
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

// hub delivers handoffs to the waiters of a client. Each client has a
// channel of its own, and a queued request names it, so a release wakes
// only the client of the waiter it hands the lock to, and there only that
// waiter: never a herd, across processes or within one. The client
// subscribes on one pub/sub connection when it first waits, and stays
// subscribed until it closes.
type hub struct {
	rdb     redis.UniversalClient
	channel string // this client's: "h<request> <token>" messages

	mu      sync.Mutex
	ps      *redis.PubSub
	ready   chan struct{} // closed when the server confirmed the subscription
	once    sync.Once
	waiters map[string]chan uint64
	done    chan struct{}
	closed  bool
}

func newHub(rdb redis.UniversalClient, prefix string) *hub {
	id := dlock.NewOwnerID()
	return &hub{rdb: rdb, channel: prefix + ":handoffs:" + id,
		waiters: map[string]chan uint64{}, ready: make(chan struct{})}
}

// await returns the channel on which the token of a lock handed to req
// arrives, once the server has confirmed the client's subscription.
func (h *hub) await(ctx context.Context, req string) (<-chan uint64, error) {
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
	w := make(chan uint64, 1)
	h.waiters[req] = w
	h.mu.Unlock()
	select {
	case <-h.ready:
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
			req, tok, ok := strings.Cut(strings.TrimPrefix(m.Payload, "h"), " ")
			token, err := strconv.ParseUint(tok, 10, 64)
			if !ok || err != nil {
				continue
			}
			h.mu.Lock()
			if w := h.waiters[req]; w != nil {
				select {
				case w <- token:
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
	h.waiters = map[string]chan uint64{}
	h.closed = true
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-done
	}
}
