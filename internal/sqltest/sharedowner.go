package sqltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// SharedOwnerIDsFallOff: one owner shared by a (through pa), c (through pc)
// and b. a's release is applied and its reply lost (pending on a); then
// seven of c's releases are, each re-sending c's pending ids, and one more
// goes through. a's next release settles its first: the row must still
// list its id, so b's hold stays and no other owner is granted. When the
// row appended every id it was sent, listed or not, c's re-sent ids pushed
// a's out after eight releases instead of 32, and another owner was granted
// beside b's live lease (an adversary's run: 3 rounds of 3, on both
// stores). d is the proxies' delay and dl an Unlock deadline between the
// statement's landing and its reply's.
func SharedOwnerIDsFallOff(t *testing.T, a, b, c *dlock.Client, pa, pc *testserver.Proxy, rowHolds func(string) int64, d, dl time.Duration, rounds int) {
	t.Helper()
	ctx := t.Context()
	var tested int
	for round := range rounds {
		name := fmt.Sprintf("ids-fall-off-%d-%s", round, dlock.NewOwnerID()[:8])
		owner := dlock.NewOwnerID()
		la, lb, lc := lockN(t, a, name, owner, 2), lockN(t, b, name, owner, 1)[0], lockN(t, c, name, owner, 8)
		if !lostReply(t, a, la[0], pa, rowHolds, name, d, dl) {
			for _, l := range append(append(la[1:], lb), lc...) {
				_ = l.Unlock(ctx)
			}
			continue
		}
		tested++
		lost := 0
		for _, l := range lc[:7] {
			if lostReply(t, c, l, pc, rowHolds, name, d, dl) {
				lost++
			}
		}
		if err := lc[7].Unlock(ctx); err != nil {
			t.Errorf("round %d: c's last Unlock: %v", round, err)
		}
		if err := la[1].Unlock(ctx); err != nil { // settles a's first release
			t.Errorf("round %d: a's next Unlock: %v", round, err)
		}
		h := rowHolds(name)
		if other, err := b.Mutex(name).TryLock(ctx); err == nil {
			t.Errorf("round %d (%d of c's 7 replies lost): another owner got token %d while b's lease (token %d, Err %v) lives; the row held %d",
				round, lost, other.Token(), lb.Token(), lb.Err(), h)
			_ = other.Unlock(ctx)
		} else if h != 1 {
			t.Errorf("round %d: the row holds %d; want b's 1", round, h)
		}
		if err := lb.Unlock(ctx); err != nil {
			t.Errorf("round %d: b's Unlock: %v", round, err)
		}
	}
	if tested == 0 {
		t.Fatal("a's release never lost its reply after it was applied: the case was not tested")
	}
}

// SharedOwnerFlakySettles: as SharedOwnerIDsFallOff, but after a's and c's
// lost replies only c's settles run, settles times, each applied with its
// reply lost (c's TryLocks on a flaky link), re-sending c's one pending id;
// then c and a release. The repeated id must not take the row's places:
// b's hold stays, and no other owner is granted.
func SharedOwnerFlakySettles(t *testing.T, a, b, c *dlock.Client, pa, pc *testserver.Proxy, rowHolds func(string) int64, d, dl time.Duration, settles int) {
	t.Helper()
	// The lost replies hang on timing, which a loaded machine can miss (a
	// busy run once held a's release past its deadline, unapplied): the
	// case is set up again, on a new name, up to three times.
	for range 3 {
		if flakySettles(t, a, b, c, pa, pc, rowHolds, d, dl, settles) {
			return
		}
	}
	t.Fatal("a's or c's release never lost its reply after it was applied: the case was not tested")
}

// flakySettles is one try of SharedOwnerFlakySettles; false if its lost
// replies could not be set up.
func flakySettles(t *testing.T, a, b, c *dlock.Client, pa, pc *testserver.Proxy, rowHolds func(string) int64, d, dl time.Duration, settles int) bool {
	t.Helper()
	ctx := t.Context()
	name := "flaky-settles-" + dlock.NewOwnerID()[:8]
	owner := dlock.NewOwnerID()
	la, lb, lc := lockN(t, a, name, owner, 2), lockN(t, b, name, owner, 1)[0], lockN(t, c, name, owner, 2)
	if !lostReply(t, a, la[0], pa, rowHolds, name, d, dl) || !lostReply(t, c, lc[0], pc, rowHolds, name, d, dl) {
		for _, l := range []*dlock.Lease{la[0], la[1], lb, lc[0], lc[1]} {
			_ = l.Unlock(ctx)
		}
		return false
	}
	for range settles {
		warm(c, name)
		pc.SetDelay(d)
		tctx, cancel := context.WithTimeout(ctx, dl)
		l, err := c.Mutex(name, dlock.WithTTL(60*time.Second), dlock.WithOwner(owner)).TryLock(tctx)
		cancel()
		time.Sleep(4*d + 50*time.Millisecond)
		pc.SetDelay(0)
		if err == nil {
			_ = l.Unlock(ctx)
		}
	}
	if err := lc[1].Unlock(ctx); err != nil {
		t.Errorf("c's Unlock: %v", err)
	}
	if err := la[1].Unlock(ctx); err != nil { // settles a's first release
		t.Errorf("a's Unlock: %v", err)
	}
	h := rowHolds(name)
	if other, err := b.Mutex(name).TryLock(ctx); err == nil {
		t.Errorf("another owner got token %d while b's lease (token %d, Err %v) lives; the row held %d", other.Token(), lb.Token(), lb.Err(), h)
		_ = other.Unlock(ctx)
	} else if h != 1 {
		t.Errorf("the row holds %d; want b's 1", h)
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Errorf("b's Unlock: %v", err)
	}
	return true
}

// LateReleaseLeavesNoHold: one owner shared by a (through px) and b; a
// holds 3, b 1. a's first release is held in px past its Unlock's
// deadline, and a's next two releases run at once (the first settles it),
// leaving b's 1. When the held-back release lands, listed, it must do
// nothing: its floor (a's 2 holds when it was sent) used to raise the row
// to 2, a hold of nobody's that every re-entry of the owner refreshed, so
// that no other owner got the lock after every lease was released.
func LateReleaseLeavesNoHold(t *testing.T, a, b *dlock.Client, px *testserver.Proxy, rowHolds func(name string) int64, rounds int) {
	t.Helper()
	ctx := t.Context()
	const d = 120 * time.Millisecond
	deadlines := []time.Duration{d / 4, d / 2, 9 * d / 4, 5 * d / 2}
	var tested int
	for round := range rounds {
		name := fmt.Sprintf("late-no-hold-%d-%s", round, dlock.NewOwnerID()[:8])
		owner := dlock.NewOwnerID()
		la, lb := lockN(t, a, name, owner, 3), lockN(t, b, name, owner, 1)[0]
		px.SetDelay(d)
		uctx, cancel := context.WithTimeout(ctx, deadlines[round%len(deadlines)])
		e1 := la[0].Unlock(uctx)
		cancel()
		px.SetDelay(0)
		for _, l := range la[1:] {
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("round %d: a's Unlock: %v", round, err)
			}
		}
		time.Sleep(4*d + 150*time.Millisecond) // the held-back release has landed
		after := rowHolds(name)
		if err := lb.Unlock(ctx); err != nil {
			t.Errorf("round %d: b's Unlock: %v", round, err)
		}
		if e1 == nil {
			continue
		}
		tested++
		if end := rowHolds(name); after != 1 || end != -1 {
			t.Errorf("round %d: the row holds %d once a's held-back release landed (want b's 1), %d after every lease was released (want none)", round, after, end)
		}
	}
	if tested == 0 {
		t.Fatal("a's first Unlock never ended before its reply: the case was not tested")
	}
}

// lockN locks name n times on cl as owner (a TTL of a minute).
func lockN(t *testing.T, cl *dlock.Client, name, owner string, n int) []*dlock.Lease {
	t.Helper()
	m := cl.Mutex(name, dlock.WithTTL(time.Minute), dlock.WithOwner(owner))
	ls := make([]*dlock.Lease, n)
	for i := range ls {
		l, err := m.Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	return ls
}

// lostReply unlocks l on cl through px, delayed by d each way with a
// deadline dl, and reports whether the release was applied (the row one
// hold lower) with its reply lost (an error).
func lostReply(t *testing.T, cl *dlock.Client, l *dlock.Lease, px *testserver.Proxy, rowHolds func(string) int64, name string, d, dl time.Duration) bool {
	t.Helper()
	warm(cl, name)
	before := rowHolds(name)
	px.SetDelay(d)
	uctx, cancel := context.WithTimeout(t.Context(), dl)
	err := l.Unlock(uctx)
	cancel()
	time.Sleep(4*d + 50*time.Millisecond) // every held-back byte has landed
	px.SetDelay(0)
	after := rowHolds(name)
	if err == nil || after != before-1 {
		t.Logf("not a lost reply: Unlock %v, the row held %d, then %d", err, before, after)
		return false
	}
	return true
}

// warm opens a few idle connections in cl's pool, so that a statement sent
// under a delay does not wait for a new connection's handshake.
func warm(cl *dlock.Client, name string) {
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { _, _ = cl.Inspect(context.Background(), name) })
	}
	wg.Wait()
}
