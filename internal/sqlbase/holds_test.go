package sqlbase

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// store is one row's hold count and applied drop ids, as the SQL
// statements keep them.
type store struct {
	token   uint64
	holds   int
	applied map[string]bool
	down    bool // statements fail
	lost    bool // statements apply but their replies are lost
}

func (s *store) stmt(_ context.Context, st Settle) (int, Outcome, error) {
	if s.down {
		return 0, Uncertain, errors.New("down")
	}
	if s.holds == 0 || s.token != st.Token {
		return 0, Gone, nil
	}
	sub := 0
	for _, d := range st.Drops {
		if !s.applied[d.ID] {
			sub += d.Count
		}
		if s.applied == nil {
			s.applied = map[string]bool{}
		}
		s.applied[d.ID] = true
	}
	s.holds = max(s.holds-sub, min(st.Floor, s.holds), 0) // a floor never raises the row
	if s.lost {
		return 0, Uncertain, errors.New("reply lost")
	}
	return s.holds, Applied, nil
}

func TestFailedReleaseIsSettled(t *testing.T) {
	ctx := context.Background()
	for _, lost := range []bool{false, true} { // the failed release was not applied, or was
		var h Holds
		s := &store{token: 5}
		grant := func() { s.holds++; h.Granted("n", "o", 5) }
		grant()
		grant() // a re-entry: two holds
		s.down, s.lost = !lost, lost
		if _, o, _ := h.Drop(ctx, "n", "o", 5, 1, time.Second, s.stmt); o != Uncertain {
			t.Fatalf("lost=%v: release outcome %v", lost, o)
		}
		s.down, s.lost = false, false
		// The next acquire settles what is owed, keeping the hold still believed.
		if err := h.Settle(ctx, "n", "o", s.stmt); err != nil {
			t.Fatal(err)
		}
		if s.holds != 1 {
			t.Fatalf("lost=%v: %d holds after settling; want the 1 still held", lost, s.holds)
		}
		if _, ok := h.pending("n", "o"); ok {
			t.Fatalf("lost=%v: still pending after settling", lost)
		}
		if left, o, err := h.Drop(ctx, "n", "o", 5, 1, time.Second, s.stmt); o != Applied || left != 0 || err != nil {
			t.Fatalf("lost=%v: last release = %d, %v, %v", lost, left, o, err)
		}
		if len(h.m) != 0 {
			t.Fatalf("lost=%v: %d holds remembered after the last release", lost, len(h.m))
		}
	}
}

func TestSettleWhileDownBlocksAcquire(t *testing.T) {
	ctx := context.Background()
	var h Holds
	s := &store{token: 7, holds: 1}
	h.Granted("n", "o", 7)
	s.down = true
	_, _, _ = h.Drop(ctx, "n", "o", 7, 1, time.Second, s.stmt)
	if err := h.Settle(ctx, "n", "o", s.stmt); err == nil {
		t.Fatal("settle succeeded with the store down")
	}
	s.down = false
	if err := h.Settle(ctx, "n", "o", s.stmt); err != nil || s.holds != 0 {
		t.Fatalf("settle = %v, %d holds left", err, s.holds)
	}
}

// Two releases of one owner's holds do not overlap: each one's floor
// counts the other's hold, so overlapping, each would keep the other's and
// the row would keep a hold nobody releases. The second waits for the
// first's statement to return.
func TestReleasesOfOneOwnerRunAlone(t *testing.T) {
	ctx := context.Background()
	var h Holds
	s := &store{token: 3}
	for range 2 {
		s.holds++
		h.Granted("n", "o", 3)
	}
	second := make(chan Outcome, 1)
	firstDone := false
	var mu sync.Mutex
	_, o, err := h.Drop(ctx, "n", "o", 3, 1, time.Second, func(ctx context.Context, st Settle) (int, Outcome, error) {
		go func() {
			_, o, _ := h.Drop(ctx, "n", "o", 3, 1, time.Second, func(ctx context.Context, st Settle) (int, Outcome, error) {
				mu.Lock()
				defer mu.Unlock()
				if !firstDone {
					t.Error("the second release ran while the first was in flight")
				}
				return s.stmt(ctx, st)
			})
			second <- o
		}()
		time.Sleep(20 * time.Millisecond) // the second release has had time to overtake, if it could
		left, o, err := s.stmt(ctx, st)
		mu.Lock()
		firstDone = true
		mu.Unlock()
		return left, o, err
	})
	if o2 := <-second; o != Applied || o2 != Applied || err != nil {
		t.Fatalf("releases = %v and %v, %v; want both applied", o, o2, err)
	}
	if s.holds != 0 {
		t.Fatalf("%d holds left after both holds were released; want 0", s.holds)
	}
	if len(h.m) != 0 {
		t.Fatalf("%d holds remembered after the last release", len(h.m))
	}
}

// A statement that waits for its (name, owner)'s gate behind a settle whose
// statement does not return (a blackholed connection) ends with its ctx:
// an acquire (Enter), a settle (Settle) and a release (Drop) alike. The
// release that gave up waiting leaves its hold pending, to be settled.
func TestGateWaitEndsWithCtx(t *testing.T) {
	var h Holds
	s := &store{token: 5}
	for range 3 {
		s.holds++
		h.Granted("n", "o", 5)
	}
	s.down = true // the first release fails uncertainly: one hold pending
	if _, o, _ := h.Drop(context.Background(), "n", "o", 5, 1, time.Minute, s.stmt); o != Uncertain {
		t.Fatalf("release outcome %v; want Uncertain", o)
	}
	s.down = false

	stuck, unstick := make(chan struct{}), make(chan struct{})
	settling := make(chan error, 1)
	go func() { // the next release settles the pending hold, alone, and hangs
		_, _, err := h.Drop(context.Background(), "n", "o", 5, 1, time.Minute, func(ctx context.Context, st Settle) (int, Outcome, error) {
			close(stuck)
			<-unstick
			return s.stmt(ctx, st)
		})
		settling <- err
	}()
	<-stuck
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if end, err := h.Enter(ctx, "n", "o"); !errors.Is(err, context.DeadlineExceeded) {
		if end != nil {
			end()
		}
		t.Errorf("Enter behind a hung settle = %v; want its ctx's end", err)
	}
	if _, o, err := h.Drop(ctx, "n", "o", 5, 1, time.Minute, s.stmt); o != Uncertain || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Drop behind a hung settle = %v, %v; want Uncertain and its ctx's end", o, err)
	}
	if _, ok := h.pending("n", "o"); !ok {
		t.Error("the release that gave up waiting left nothing pending")
	}
	if err := h.Settle(ctx, "n", "o", s.stmt); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Settle behind a hung settle = %v; want its ctx's end", err)
	}
	close(unstick)
	if err := <-settling; err != nil {
		t.Fatal(err)
	}
	if err := h.Settle(context.Background(), "n", "o", s.stmt); err != nil { // what the give-up left
		t.Fatal(err)
	}
	if s.holds != 0 {
		t.Errorf("%d holds in the store after every hold was released or settled; want 0", s.holds)
	}
}

// Two processes of one owner share a row: each holds it once. A's release
// is applied but its reply is lost; A's settle must not drop B's hold, which
// A's floor (its own holds, none) does not keep. The settle sends the
// release's id again, and the store, which has applied it, applies nothing.
func TestSettleSparesASharedOwnersHolds(t *testing.T) {
	ctx := context.Background()
	var a, b Holds
	s := &store{token: 7}
	for _, h := range []*Holds{&a, &b} {
		s.holds++
		h.Granted("n", "o", 7)
	}
	s.lost = true
	if _, o, _ := a.Drop(ctx, "n", "o", 7, 1, time.Second, s.stmt); o != Uncertain {
		t.Fatalf("release outcome %v; want uncertain", o)
	}
	s.lost = false
	if s.holds != 1 {
		t.Fatalf("%d holds after A's release; want B's 1", s.holds)
	}
	if err := a.Settle(ctx, "n", "o", s.stmt); err != nil {
		t.Fatal(err)
	}
	if s.holds != 1 {
		t.Fatalf("%d holds after A settled its release; want B's 1", s.holds)
	}
	if _, ok := a.pending("n", "o"); ok {
		t.Fatal("still pending after settling")
	}
	// A release whose reply is lost twice: the second try of the same
	// release (a settle) carries the same id, and the next release both.
	s.holds++
	a.Granted("n", "o", 7)
	s.lost = true
	a.Drop(ctx, "n", "o", 7, 1, time.Second, s.stmt)
	a.Settle(ctx, "n", "o", s.stmt)
	s.lost = false
	s.holds++
	a.Granted("n", "o", 7)
	if left, o, err := a.Drop(ctx, "n", "o", 7, 1, time.Second, s.stmt); o != Applied || left != 1 || err != nil {
		t.Fatalf("A's next release = %d, %v, %v; want B's 1 hold left", left, o, err)
	}
	if left, o, err := b.Drop(ctx, "n", "o", 7, 1, time.Second, s.stmt); o != Applied || left != 0 || err != nil {
		t.Fatalf("B's release = %d, %v, %v; want 0 left", left, o, err)
	}
}
