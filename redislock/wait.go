package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	var b [16]byte
	_, _ = rand.Read(b[:])
	req := hex.EncodeToString(b[:])
	sent := time.Now()
	g, err := d.try(ctx, k, r, req)
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
	sub, err := d.hub.subscribe(ctx, k.chann)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("redislock: subscribe: %w", err)
	}
	defer d.hub.unsubscribe(k.chann, sub)
	handoff := "h" + req + " "
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		// Refresh our place; this also finds a handoff made before the
		// subscription was in place.
		sent = time.Now()
		g, err = d.try(ctx, k, r, req)
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
	listen:
		select {
		case msg := <-sub:
			if tok, ok := strings.CutPrefix(msg, handoff); ok {
				token, err := strconv.ParseUint(tok, 10, 64)
				if err == nil {
					granted = true
					return driver.Grant{Acquired: true, Token: token, Holds: 1,
						Validity: min(r.TTL, handoffTTL), Since: sent, Handle: k}, nil
				}
			}
			goto listen // handed to another waiter: keep waiting
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

// hub shares one pub/sub connection among every waiter of a client: it
// subscribes to a lock's channel while someone waits for it.
type hub struct {
	rdb    redis.UniversalClient
	mu     sync.Mutex
	ps     *redis.PubSub
	subs   map[string]*channelSubs
	done   chan struct{}
	closed bool
}

type channelSubs struct {
	ready   chan struct{} // closed when the server confirmed the subscription
	once    sync.Once
	waiters map[chan string]struct{}
}

func newHub(rdb redis.UniversalClient) *hub {
	return &hub{rdb: rdb, subs: map[string]*channelSubs{}}
}

// subscribe returns a channel of the messages published on ch, once the
// server has confirmed the subscription.
func (h *hub) subscribe(ctx context.Context, ch string) (chan string, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, dlock.ErrClosed
	}
	if h.ps == nil {
		h.ps = h.rdb.Subscribe(context.WithoutCancel(ctx))
		h.done = make(chan struct{})
		go h.dispatch(h.ps.ChannelWithSubscriptions(redis.WithChannelSize(1000)))
	}
	cs := h.subs[ch]
	if cs == nil {
		cs = &channelSubs{ready: make(chan struct{}), waiters: map[chan string]struct{}{}}
		h.subs[ch] = cs
		if err := h.ps.Subscribe(ctx, ch); err != nil {
			delete(h.subs, ch)
			h.mu.Unlock()
			return nil, err
		}
	}
	w := make(chan string, 16)
	cs.waiters[w] = struct{}{}
	h.mu.Unlock()
	select {
	case <-cs.ready:
		return w, nil
	case <-ctx.Done():
		h.unsubscribe(ch, w)
		return nil, ctx.Err()
	}
}

func (h *hub) unsubscribe(ch string, w chan string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := h.subs[ch]
	if cs == nil {
		return
	}
	delete(cs.waiters, w)
	if len(cs.waiters) == 0 {
		delete(h.subs, ch)
		if h.ps != nil { // nil once the hub is closed
			_ = h.ps.Unsubscribe(context.Background(), ch)
		}
	}
}

func (h *hub) dispatch(in <-chan any) {
	defer close(h.done)
	for m := range in {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.mu.Lock()
				if cs := h.subs[m.Channel]; cs != nil {
					cs.once.Do(func() { close(cs.ready) })
				}
				h.mu.Unlock()
			}
		case *redis.Message:
			h.mu.Lock()
			if cs := h.subs[m.Channel]; cs != nil {
				for w := range cs.waiters {
					select {
					case w <- m.Payload:
					default: // the waiter is behind; its keep-alive retry catches up
					}
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
	h.subs = map[string]*channelSubs{}
	h.closed = true
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-done
	}
}
