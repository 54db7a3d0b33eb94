package redislock_test

import (
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/redisnode"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// A waiter that hears of a handoff to it made after its last acquire call
// takes the lock on the message's word, without another round trip: its
// Lock returns while the handed lock still has the handoff's capped TTL (an
// acquire call proving the handoff would have extended it to the waiter's
// 30 s), and the lease's token is the store's. (A message of an older
// handoff proves nothing: TestPausedWaiterIsNotGrantedAStaleHandoff.)
func TestHandoffMessageProvesTheGrant(t *testing.T) {
	h := newHandoffRig(t, "handoff-proof")
	// A run is conclusive when the release comes after the waiter's first
	// refresh of its place and before its next (a second apart); on a busy
	// machine one may not be, so up to five are made.
	for attempt := 1; ; attempt++ {
		pttl := h.handoff(t)
		if pttl > 0 && pttl <= redisnode.HandoffTTL {
			return // granted by the message alone
		}
		if attempt == 5 {
			t.Fatalf("in 5 handoffs the waiter's Lock returned only once a call had extended the handed lock (PTTL %v, the handoff's cap %v): "+
				"the handoff's message was not taken as proof", pttl, redisnode.HandoffTTL)
		}
	}
}

// A lease that will not be renewed gets its whole TTL from a handoff: the
// handed lock's capped TTL is extended before its Lock returns, since
// nothing would extend it later.
func TestHandoffToAnUnrenewedLeaseGivesItsWholeTTL(t *testing.T) {
	h := newHandoffRig(t, "handoff-unrenewed", dlock.WithTTL(10*time.Second), dlock.WithoutRenewal())
	for range 3 {
		if pttl := h.handoff(t); pttl <= redisnode.HandoffTTL {
			t.Fatalf("a lease without renewal was handed the lock with %v left in the store; want its TTL, 10 s", pttl)
		}
	}
}

type handoffRig struct {
	name                string
	opts                []dlock.Option
	holder, waiter, adm *dlock.Client
	rdb                 *redis.Client
	lock, queue, qinfo  string
}

func newHandoffRig(t *testing.T, name string, opts ...dlock.Option) *handoffRig {
	srv := testserver.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	base := "dlock:{" + name + "}"
	return &handoffRig{name: name, opts: opts, holder: openURL(t, srv), waiter: openURL(t, srv), adm: openURL(t, srv),
		rdb: rdb, lock: base, queue: base + ":queue", qinfo: base + ":queueinfo"}
}

// handoff makes one handoff from a holder to a waiter (with the rig's
// options), after the waiter's first refresh of its place, checks that the
// store's hold is the waiter's lease, and returns the lock's PTTL in the
// store as the waiter's Lock returned.
func (h *handoffRig) handoff(t *testing.T) time.Duration {
	t.Helper()
	ctx := t.Context()
	l, err := h.holder.Mutex(h.name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := drivertest.Go(func() (*dlock.Lease, error) { return h.waiter.Mutex(h.name, h.opts...).Lock(ctx) })
	var req, place string
	for end := time.Now().Add(10 * time.Second); place == ""; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the waiter did not queue in 10 s")
		}
		if q := h.rdb.LRange(ctx, h.queue, 0, -1).Val(); len(q) == 1 {
			req = q[0]
			place = h.rdb.HGet(ctx, h.qinfo, req).Val()
		}
	}
	// Its first refresh, once subscribed, rewrites its place's expiry.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if h.rdb.HGet(ctx, h.qinfo, req).Val() != place {
			break
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	got := w.Want(t, 10*time.Second, "the waiter's Lock")
	pttl := h.rdb.PTTL(ctx, h.lock).Val()
	in, err := h.adm.Inspect(ctx, h.name)
	if err != nil {
		t.Fatal(err)
	}
	if !in.Held || in.Owner != got.Owner() || in.Token != got.Token() || got.Token() <= l.Token() {
		t.Fatalf("the store has %+v; want the waiter's hold %s with its lease's token %d, above the releaser's %d",
			in, got.Owner(), got.Token(), l.Token())
	}
	if err := got.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	return pttl
}
