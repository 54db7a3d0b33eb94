package sqltest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/dlock/dlock/internal/testserver"
)

// SharedOwnerLostReply runs rounds in which two clients, a (whose
// connections go through px) and b, hold a table-mode lock with one owner
// id, once each, as two processes of one owner do; a's release is applied
// but its reply is lost (px delays it past the Unlock's deadline). a then
// locks again, which settles that release, and unlocks. b's hold must
// survive all of it: the row keeps one hold, no other owner is granted, and
// b's Unlock succeeds. When a settle dropped the holds a client gave up,
// floored only by that client's own holds, it deleted b's hold and another
// owner was granted beside b's live lease.
func SharedOwnerLostReply(t *testing.T, a, b *dlock.Client, px *testserver.Proxy, rowHolds func(name string) int64, rounds int) {
	t.Helper()
	ctx := t.Context()
	const d = 100 * time.Millisecond
	var tested, failed int
	for round := range rounds {
		name := fmt.Sprintf("shared-owner-%d-%s", round, dlock.NewOwnerID()[:8])
		owner := dlock.NewOwnerID()
		ma := a.Mutex(name, dlock.WithTTL(20*time.Second), dlock.WithOwner(owner))
		mb := b.Mutex(name, dlock.WithTTL(20*time.Second), dlock.WithOwner(owner))
		la, err := ma.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lb, err := mb.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h := rowHolds(name); h != 2 {
			t.Fatalf("round %d: the row holds %d with both clients in; want 2", round, h)
		}
		// The statement lands at d and its reply at 2d, or, when the
		// connection must prepare it first, at 3d and 4d: a deadline
		// between the two in each case.
		px.SetDelay(d)
		uctx, cancel := context.WithTimeout(ctx, []time.Duration{3 * d / 2, 7 * d / 2}[round%2])
		e1 := la.Unlock(uctx)
		cancel()
		time.Sleep(4*d + 50*time.Millisecond) // every held-back byte has landed
		px.SetDelay(0)
		if h := rowHolds(name); e1 == nil || h != 1 {
			t.Logf("round %d: a's Unlock: %v, the row holds %d after it: not the case tested", round, e1, h)
			_ = lb.Unlock(ctx)
			continue
		}
		tested++
		la, err = ma.Lock(ctx) // settles the release first
		if err != nil {
			t.Fatalf("round %d: a's next Lock: %v", round, err)
		}
		if err := la.Unlock(ctx); err != nil {
			t.Errorf("round %d: a's next Unlock: %v", round, err)
		}
		h := rowHolds(name)
		other, err := b.Mutex(name).TryLock(ctx)
		switch {
		case err == nil:
			failed++
			t.Errorf("round %d: another owner got token %d while b's lease (token %d) lives; the row held %d", round, other.Token(), lb.Token(), h)
			_ = other.Unlock(ctx)
		case !errors.Is(err, dlock.ErrNotAcquired):
			t.Fatalf("round %d: another owner's TryLock: %v", round, err)
		case h != 1:
			failed++
			t.Errorf("round %d: the row holds %d after a settled and released; want b's 1", round, h)
		}
		if err := lb.Unlock(ctx); err != nil {
			failed++
			t.Errorf("round %d: b's Unlock: %v", round, err)
		}
		if h := rowHolds(name); h != -1 {
			t.Errorf("round %d: the row holds %d after both unlocked", round, h)
		}
	}
	t.Logf("%d rounds, %d with a's release applied and its reply lost, %d failed", rounds, tested, failed)
	if tested == 0 {
		t.Fatal("no round lost a's reply after the release was applied: the case was not tested")
	}
}

// KeptDropIDs re-enters a table-mode lock on c 40 times and releases all
// but 5 of those holds: the row must count 5 holds and list the ids of the
// last sqlbase.KeptDrops releases, not more (kept reads how many ids the
// row lists); then every release, to the last, works.
func KeptDropIDs(t *testing.T, c *dlock.Client, kept func(name string) int) {
	t.Helper()
	ctx := t.Context()
	name := "kept-drops-" + dlock.NewOwnerID()[:8]
	m := c.Mutex(name, dlock.WithTTL(20*time.Second), dlock.WithOwner(dlock.NewOwnerID()))
	leases := make([]*dlock.Lease, 40)
	for i := range leases {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	for _, l := range leases[5:] {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if info, err := c.Inspect(ctx, name); err != nil || info.Holds != 5 {
		t.Fatalf("Inspect after 35 of 40 releases = %+v, %v; want 5 holds", info, err)
	}
	if n := kept(name); n != sqlbase.KeptDrops {
		t.Errorf("the row lists %d release ids after 35 releases; want the last %d", n, sqlbase.KeptDrops)
	}
	for _, l := range leases[:5] {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if info, err := c.Inspect(ctx, name); err != nil || info.Held {
		t.Fatalf("Inspect after every release = %+v, %v; want free", info, err)
	}
}
