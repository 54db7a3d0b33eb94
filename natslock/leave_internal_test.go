package natslock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/nats-io/nats.go/jetstream"
)

// A waiter whose ctx ends while a release is handing it the lock (the
// release read the queue before the waiter's queue key went, and writes
// the key after the waiter looked at it) is not left holding it: the
// handover is refused on the key's revision, and the release frees the
// lock instead. Before, the handover landed and the key stayed held, by a
// hold nobody had, until its TTL.
func TestLeaveDuringHandover(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newTestDriver(t, ctx)
	r, ga, b := flaggedHold(t, ctx, d, "leave")
	a := ga.Handle.(*hold)
	// a's release finds the flag (its purge refused on the revision, it
	// reads the key again) and reads the queue: b heads it.
	rev, err := d.ownRevision(ctx, a)
	if err != nil || !a.val.W {
		t.Fatalf("a's key after b's flag: %v, flagged %v", err, a.val.W)
	}
	a.rev = rev
	v, ok, err := d.nextHolder(ctx, "leave")
	if err != nil || !ok || v.ID != b.h.val.ID {
		t.Fatalf("nextHolder: %+v, %v, %v; want b's hold", v, ok, err)
	}
	d.leaveQueue(ctx, b.r, b.h, b.key) // b's ctx ends
	if err := d.handTo(ctx, a, v); !wrongRevision(err) {
		t.Errorf("a's handover to b, after b left: %v; want it refused on the revision", err)
	}
	if err := d.Release(ctx, driver.Held{Name: "leave", Owner: "a", TTL: r.TTL, Token: ga.Token, Handle: a}, 1); err != nil {
		t.Errorf("a's release: %v", err)
	}
	if info, err := d.Inspect(ctx, "leave"); err != nil || info.Held {
		t.Errorf("Inspect after a's release, b gone: %+v, %v; want the lock free", info, err)
	}
}

// The rewrites of a holder's key by waiters (a flag, and the fence of each
// waiter that leaves) keep its expiry, within the second the TTL is
// rounded up to: waiters leaving one after another do not keep a dead
// holder's key past its TTL.
func TestFenceKeepsExpiry(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newTestDriver(t, ctx)
	r := driver.Request{Name: "exp", Owner: "a", TTL: 30 * time.Second}
	g, err := d.Acquire(ctx, r)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	e, err := d.kv.Get(ctx, key("exp"))
	if err != nil {
		t.Fatal(err)
	}
	exp := e.Created().Add(r.TTL)
	if _, err := waiter(t, ctx, d, "exp", "b").step(ctx, d); err != nil { // flags a's key
		t.Fatal(err)
	}
	st, err := d.js.Stream(ctx, "KV_"+d.bucket)
	if err != nil {
		t.Fatal(err)
	}
	last := e.Revision()
	for i := range 2 {
		time.Sleep(1100 * time.Millisecond)
		c := waiter(t, ctx, d, "exp", fmt.Sprint("c", i))
		d.leaveQueue(ctx, c.r, c.h, c.key)
		m, err := st.GetLastMsgForSubject(ctx, "$KV."+d.bucket+"."+key("exp"))
		if err != nil {
			t.Fatal(err)
		}
		if v := decode(t, m.Data); v.ID != g.Handle.(*hold).val.ID || m.Sequence <= last {
			t.Fatalf("after waiter %d left, the key holds %+v at revision %d; want a's hold rewritten after %d", i, v, m.Sequence, last)
		}
		last = m.Sequence
		ttl, err := time.ParseDuration(m.Header.Get(jetstream.MsgTTLHeader))
		if err != nil {
			t.Fatal(err)
		}
		if until := m.Time.Add(ttl); until.After(exp.Add(time.Second)) {
			t.Errorf("after waiter %d left, the key expires %v after a's write did; want at most 1s", i, until.Sub(exp))
		}
	}
}

// A hold given back (a create whose reply was lost, undone; a grant the
// bucket check refused) is released even if a waiter flagged the key after
// the hold's revision was read: the give-back follows the key's revision
// as a release does. Before, it was one purge at that revision, refused,
// and the key stayed held, by a hold nobody had, to its TTL.
func TestGiveBackAfterFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newTestDriver(t, ctx)
	r := driver.Request{Name: "back", Owner: "a", TTL: 30 * time.Second}
	h := &hold{key: key("back"), val: value{Owner: "a", ID: newID(), TTL: r.TTL.Milliseconds()}}
	if g, err := d.tryCreate(ctx, r, h); err != nil || !g.Acquired { // its reply, say, lost
		t.Fatalf("create: %+v, %v", g, err)
	}
	b := waiter(t, ctx, d, "back", "b")
	if _, err := b.step(ctx, d); err != nil { // flags a's key
		t.Fatal(err)
	}
	d.dropQueueKey(ctx, b.key) // b gives up: nobody to hand the lock to
	d.giveBack(ctx, r, h)
	if info, err := d.Inspect(ctx, "back"); err != nil || info.Held {
		t.Errorf("Inspect after the give-back: %+v, %v; want the lock free", info, err)
	}
}
