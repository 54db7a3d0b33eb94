package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
// A handoff message is a claim about the past: a process paused after it
// arrived (SIGSTOP, a long GC pause) reads it seconds later, when the handed
// lock may have expired and gone to another waiter. So a grant wait returns
// is proven, with a validity counted from a moment before the grant:
//   - by the message itself, when handoffProof accepts it: its token is
//     greater than the counter the request's last acquire call saw, so the
//     handoff came after that call was sent, and the handed lock's TTL
//     counts from then. This saves the round trip of every contended Lock;
//   - otherwise by an acquire call that finds the lock held by this request
//     (or grants it), its validity counted from that call's send time.
//
// Every way out that is not a grant takes the request out of the queue and
// passes on a lock handed to it.
func (d *redisDriver) wait(ctx context.Context, k redisnode.Keys, r driver.Request) (driver.Grant, error) {
	req := d.node.NewRequest()
	granted := false // or nothing to undo
	defer func() {
		if !granted { // leave the queue; pass the lock on if it was just handed to us
			d.cancel(ctx, k, r.Owner, req)
		}
	}()
	var proof handoffProof
	sent := time.Now()
	g, ng, err := d.try(ctx, k, r, req, d.hub.channel) // Since: when Acquire began, just before
	if err != nil || g.Acquired {
		granted = err == nil || errors.Is(err, redisnode.ErrUnsettled) // the latter was never sent
		return g, err
	}
	proof.note(sent, ng)
	w, err := d.hub.await(ctx, req)
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
		// Refresh our place. This is also what proves a handoff whose
		// message did not prove itself, or was lost (made before the
		// subscription was in place, or dropped with the pub/sub
		// connection): the script finds the lock held by this request and
		// extends it to the TTL.
		sent = time.Now()
		g, ng, err = d.try(ctx, k, r, req, d.hub.channel)
		if err == nil && g.Acquired {
			granted = true
			g.Since = sent
			return g, nil
		}
		if err != nil && (ctx.Err() != nil || errors.Is(err, driver.ErrLimitMismatch)) {
			return driver.Grant{}, err
		}
		if err == nil {
			proof.note(sent, ng)
		}
		next := keepalive.RenewInterval(redisnode.WaiterTTL) // refresh the waiter's place
		if g.Retry > 0 && g.Retry < next {                   // the holder's lease ends first
			next = g.Retry + time.Millisecond
		}
		timer.Reset(next)
		select {
		case <-w.handed:
			if g, ok := proof.grant(w.token.Load(), k, r); ok {
				granted = true
				return g, nil
			}
			// else refresh now: it finds the lock if it is still ours
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

// handoffProof is what a waiter knows from its request's last acquire call
// that queued it: when it was sent, and the lock's token counter as it left
// it. Every grant of the lock takes the next value of that counter (INCR),
// so a handoff to the request announced with a greater token was made after
// that call ran, which is after it was sent; and a handoff sets the lock's
// TTL to min(TTL, redisnode.HandoffTTL) from when it is made. The lock is
// therefore the request's for at least that long from the send time, and
// the message alone proves the grant, without another round trip. A message
// of an older handoff (whose lock expired while the process was paused, and
// whose request then queued again) carries a token at or below the counter,
// and proves nothing.
type handoffProof struct {
	sent    time.Time
	counter uint64
	known   bool
}

// note records the answer g to an acquire call sent at sent.
func (p *handoffProof) note(sent time.Time, g redisnode.Grant) {
	if g.Queued {
		p.sent, p.counter, p.known = sent, g.Counter, true
	}
}

// grant returns the hold that a handoff with token gives request r, if the
// message proves it (see handoffProof), and at least half of the handed
// TTL is left: a waiter whose last call is older than that proves the
// handoff with a call, which also extends the lock to r's TTL. A request
// that will not be renewed must get its whole TTL, so only a TTL no longer
// than the handoff's cap is taken from a message for it.
func (p *handoffProof) grant(token uint64, k redisnode.Keys, r driver.Request) (driver.Grant, bool) {
	v := min(r.TTL, redisnode.HandoffTTL)
	if !p.known || token <= p.counter || k.Kind() != driver.Exclusive ||
		(!r.Renews && r.TTL > redisnode.HandoffTTL) || time.Since(p.sent) >= v/2 {
		return driver.Grant{}, false
	}
	return driver.Grant{Acquired: true, Token: token, Holds: 1, Validity: v, Since: p.sent, Handle: k}, true
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
	if err := d.node.Cancel(cctx, k, owner, req); err != nil {
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
	channel string // this client's: "h<request> <token>" messages

	mu      sync.Mutex
	ps      *redis.PubSub
	ready   chan struct{} // closed when the server confirmed the subscription
	once    sync.Once
	waiters map[string]*waiter
	done    chan struct{}
	closed  bool
}

// waiter is what the hub tells one waiting request.
type waiter struct {
	handed chan struct{} // a handoff to the request was announced
	token  atomic.Uint64 // the greatest token a handoff to it was announced with
}

func newHub(rdb redis.UniversalClient, prefix string) *hub {
	id := dlock.NewOwnerID()
	return &hub{rdb: rdb, channel: prefix + ":handoffs:" + id,
		waiters: map[string]*waiter{}, ready: make(chan struct{})}
}

// await returns where handoffs to req are announced, once the server has
// confirmed the client's subscription. An announcement says that the lock
// was handed to req at some time, with some token: see handoffProof for
// when that proves the request holds it now.
func (h *hub) await(ctx context.Context, req string) (*waiter, error) {
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
	w := &waiter{handed: make(chan struct{}, 1)}
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
			if !ok {
				continue
			}
			token, _ := strconv.ParseUint(tok, 10, 64) // 0 (proves nothing) if it is not a number
			h.mu.Lock()
			if w := h.waiters[req]; w != nil {
				if token > w.token.Load() { // only dispatch writes it
					w.token.Store(token)
				}
				select {
				case w.handed <- struct{}{}:
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
	h.waiters = map[string]*waiter{}
	h.closed = true
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-done
	}
}
