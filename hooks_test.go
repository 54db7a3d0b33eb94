package dlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A loss found by Unlock itself (the store says the hold is gone before
// the scheduler noticed) reaches the Lost hook, as every other loss does.
func TestLostHookOnUnlockThatFindsTheHoldGone(t *testing.T) {
	d := newFake()
	var lost []Event
	c := New(d, "fake", quiet(), WithHooks(Hooks{Lost: func(_ context.Context, e Event) { lost = append(lost, e) }}))
	defer c.Close()
	ctx := t.Context()
	l, err := c.Mutex("gone", WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	delete(d.locks, "gone") // removed behind the holder's back
	d.mu.Unlock()
	if err := l.Unlock(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Unlock = %v; want ErrLeaseLost", err)
	}
	if len(lost) != 1 || !errors.Is(lost[0].Err, ErrLeaseLost) || lost[0].Name != "gone" {
		t.Fatalf("Lost hook got %+v; want one loss of \"gone\"", lost)
	}
}
