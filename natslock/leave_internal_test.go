package natslock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// A waiter whose ctx ends while a release is handing it the lock (the
// release read the queue before the waiter's queue key went, and writes
// the key after the waiter looked at it) is not left holding it: the
// release sees the waiter's queue key gone and takes the lock back.
// Before, the handover stood, and the key stayed held, by a hold nobody
// had, until the waiter's TTL.
func TestLeaveDuringHandover(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newTestDriver(t, ctx)
	_, ga, b := flaggedHold(t, ctx, d, "leave")
	a := leaveDuringHandover(t, ctx, d, "leave", ga, b)
	if info, err := d.Inspect(ctx, "leave"); err != nil || info.Held {
		t.Errorf("Inspect after a's handover to b, b gone: %+v, %v; want the lock free", info, err)
	}
	if err := d.Release(ctx, driver.Held{Name: "leave", Owner: "a", TTL: time.Minute, Handle: a}, 1); !errors.Is(err, dlock.ErrLeaseLost) {
		t.Errorf("a's release again: %v; want it lost (a handed the lock over)", err)
	}
}

// A handover to a waiter that left goes on to the next waiter, if one is
// queued, rather than freeing the lock.
func TestLeaveDuringHandoverNext(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newTestDriver(t, ctx)
	_, ga, b := flaggedHold(t, ctx, d, "leave")
	c := waiter(t, ctx, d, "leave", "c")
	leaveDuringHandover(t, ctx, d, "leave", ga, b)
	e, err := d.kv.Get(ctx, key("leave"))
	if err != nil {
		t.Fatal(err)
	}
	if v := decode(t, e.Value()); v.ID != c.h.val.ID {
		t.Fatalf("after a's handover the key holds %+v; want c's hold", v)
	}
	if g, err := c.step(ctx, d); err != nil || !g.Acquired { // c confirms
		t.Fatalf("c's confirm: %+v, %v", g, err)
	}
}

// A waiter's flag on the key handed to a waiter that left (a new revision,
// the handover's mark kept) does not stop the release from taking the
// lock back: it reads the key again and hands it to the flagging waiter.
func TestLeaveDuringHandoverFlagged(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newTestDriver(t, ctx)
	_, ga, b := flaggedHold(t, ctx, d, "leave")
	a, n := readForHandover(t, ctx, d, "leave", ga, b)
	if n.v.W {
		t.Fatalf("nextHolder: %+v; want b alone in the queue", n)
	}
	d.leaveQueue(ctx, b.r, b.h, b.key) // reads the key before the handover
	if _, err := d.handTo(ctx, a.key, a.rev, n.v); err != nil {
		t.Fatal(err)
	}
	c := waiter(t, ctx, d, "leave", "c")
	if _, err := c.step(ctx, d); err != nil { // flags the key handed to b
		t.Fatal(err)
	}
	d.takeBack(ctx, "leave", a.key, n)
	e, err := d.kv.Get(ctx, key("leave"))
	if err != nil {
		t.Fatal(err)
	}
	if v := decode(t, e.Value()); v.ID != c.h.val.ID {
		t.Fatalf("after the take-back the key holds %+v; want c's hold", v)
	}
	if g, err := c.step(ctx, d); err != nil || !g.Acquired { // c confirms
		t.Fatalf("c's confirm: %+v, %v", g, err)
	}
}

// A waiter that confirmed a handover and dropped its queue key keeps the
// lock: the release does not take back a confirmed handover.
func TestHandoverConfirmedNotTakenBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newTestDriver(t, ctx)
	_, ga, b := flaggedHold(t, ctx, d, "conf")
	a, n := readForHandover(t, ctx, d, "conf", ga, b)
	if _, err := d.handTo(ctx, a.key, a.rev, n.v); err != nil {
		t.Fatal(err)
	}
	if g, err := b.step(ctx, d); err != nil || !g.Acquired { // b confirms
		t.Fatalf("b's confirm: %+v, %v", g, err)
	}
	d.dropQueueKey(ctx, b.key) // as acquireWait does once b holds it
	d.takeBack(ctx, "conf", a.key, n)
	if info, err := d.Inspect(ctx, "conf"); err != nil || info.Owner != "b" {
		t.Errorf("Inspect after the release's check: %+v, %v; want b's hold", info, err)
	}
}

// leaveDuringHandover has the holder of grant g release name, handing it to
// the queued waiter b, with b's leave (its ctx ended) between the
// release's read of the queue and its write of the handover. It returns
// the holder's hold.
func leaveDuringHandover(t *testing.T, ctx context.Context, d *natsDriver, name string, g driver.Grant, b queued) *hold {
	t.Helper()
	a, n := readForHandover(t, ctx, d, name, g, b)
	d.leaveQueue(ctx, b.r, b.h, b.key) // reads the key before the handover
	if err := d.handOverTo(ctx, name, a, n); err != nil {
		t.Fatalf("a's handover to b: %v", err)
	}
	return a
}

// readForHandover has the holder of grant g, whose key the queued waiter b
// flagged, begin its release of name as Release does: its purge refused on
// the revision, it reads its key again, then the queue, which b heads. It
// returns the holder's hold (at the revision read) and b as the next
// holder.
func readForHandover(t *testing.T, ctx context.Context, d *natsDriver, name string, g driver.Grant, b queued) (*hold, next) {
	t.Helper()
	a := g.Handle.(*hold)
	rev, err := d.ownRevision(ctx, a)
	if err != nil || !a.val.W {
		t.Fatalf("a's key after b's flag: %v, flagged %v", err, a.val.W)
	}
	a.rev = rev
	n, ok, err := d.nextHolder(ctx, name)
	if err != nil || !ok || n.v.ID != b.h.val.ID {
		t.Fatalf("nextHolder: %+v, %v, %v; want b's hold", n, ok, err)
	}
	return a, n
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
