package redislock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TestCutOffHolderIsToldFirst: a holder whose connection to Redis goes
// silent (no reset, no FIN) must see its lease end (Done closes) before
// another client can acquire the lock. A client opened from a URL follows
// context deadlines, so a renewal sent into the silence gives up at the
// lease's deadline instead of waiting out the read timeout.
func TestCutOffHolderIsToldFirst(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	const name = "cut-off-holder"
	ttl := 2 * time.Second
	bh := testserver.NewProxy(t, srv.Addr())
	holder := drivertest.MustOpen(t, "redis://"+bh.Addr())
	other := openURL(t, srv)

	l, err := holder.Mutex(name, dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl / 2) // mid-lease, after a renewal
	bh.Blackhole()
	cut := time.Now()

	var told time.Time
	toldCh := make(chan struct{})
	go func() {
		<-l.Done()
		told = time.Now()
		close(toldCh)
	}()
	// The other client polls; the send time of its successful attempt is
	// no later than the store's grant.
	var took time.Time
	m := other.Mutex(name, dlock.WithTTL(ttl))
	for end := cut.Add(4 * ttl); ; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the other client could not take the lock of a cut-off holder")
		}
		sent := time.Now()
		ol, err := m.TryLock(ctx)
		if errors.Is(err, dlock.ErrNotAcquired) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		took = sent
		_ = ol.Unlock(ctx)
		break
	}
	select {
	case <-toldCh:
	case <-time.After(10 * time.Second):
		t.Fatalf("the cut-off holder was never told (Err %v)", l.Err())
	}
	if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
		t.Errorf("holder's Err = %v; want ErrLeaseLost", l.Err())
	}
	margin := took.Sub(told)
	t.Logf("cut at +0; holder told at %v, other acquired at %v: margin %v",
		told.Sub(cut).Round(time.Millisecond), took.Sub(cut).Round(time.Millisecond), margin.Round(time.Millisecond))
	if margin <= 0 {
		t.Errorf("the holder was told %v after another client acquired the lock", -margin)
	}
}
