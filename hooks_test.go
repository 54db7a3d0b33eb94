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

// A Lost hook may close the client when the loss is found inside an Unlock
// (one of two leases of a hold the store no longer has): Close waited for
// that Unlock, the 10 s of its drain (an adversary pass).
func TestLostHookClosesClientInsideUnlock(t *testing.T) {
	d := newFake()
	d.caps.Reentrant = true // a store that counts holds: every Unlock asks it
	var c *Client
	c = New(d, "fake", quiet(), WithHooks(Hooks{Lost: func(context.Context, Event) { _ = c.Close() }}))
	defer c.Close()
	m := c.Mutex("gone-twice", WithOwner("o"), WithTTL(time.Minute))
	l1, err := m.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock(t.Context()); err != nil { // a second lease on the hold
		t.Fatal(err)
	}
	d.mu.Lock()
	delete(d.locks, "gone-twice") // removed behind the holder's back
	d.mu.Unlock()
	unlocked := make(chan error, 1)
	go func() { unlocked <- l1.Unlock(t.Context()) }()
	select {
	case err := <-unlocked:
		if !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Unlock = %v; want ErrLeaseLost", err)
		}
	case <-time.After(5 * time.Second): // it took 10 s
		t.Fatal("Unlock whose Lost hook closed the client did not return within 5 s")
	}
}

// A slow Lost hook does not hold back Done: the leases end first. Loss is
// declared just before the store may free the lock, and a hook slower than
// that margin let another client hold it while Do's ctx was live (an
// adversary pass: 195 ms with a 200 ms hook).
func TestSlowLostHookDoesNotDelayDone(t *testing.T) {
	d := newFake()
	hookIn, hookOut := make(chan struct{}), make(chan struct{})
	c := New(d, "fake", quiet(), WithHooks(Hooks{Lost: func(context.Context, Event) {
		close(hookIn)
		<-hookOut
	}}))
	defer c.Close()
	l, err := c.Mutex("slow-hook", WithTTL(time.Second)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	d.cut.Store(true) // renewals fail: the lease is lost at its deadline
	<-hookIn
	select {
	case <-l.Done():
	default:
		t.Error("Done still open while the Lost hook runs")
	}
	close(hookOut)
}

// A hook that panics once the hold is made (Acquired, or the Call hook's
// end) gives the hold back as the panic goes on: a caller that recovers
// left the lock held, and renewed, with no lease to unlock it (an
// adversary pass).
func TestPanickingHookGivesHoldBack(t *testing.T) {
	for name, hooks := range map[string]Hooks{
		"acquired": {Acquired: func(context.Context, Event) { panic("hook") }},
		"call end": {Call: func(ctx context.Context, _ Call) (context.Context, func(uint64, error)) {
			return ctx, func(token uint64, _ error) {
				if token != 0 {
					panic("hook")
				}
			}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			d := newFake()
			c := New(d, "fake", quiet(), WithHooks(hooks))
			defer c.Close()
			other := New(d, "fake", quiet())
			defer other.Close()
			func() {
				defer func() {
					if r := recover(); r != "hook" {
						t.Errorf("recovered %v; want the hook's panic", r)
					}
				}()
				_, _ = c.Mutex("panicky", WithTTL(time.Minute)).Lock(t.Context())
			}()
			l, err := other.Mutex("panicky", WithTTL(time.Minute)).TryLock(t.Context())
			if err != nil {
				t.Fatalf("another client's TryLock after the hook panicked: %v", err)
			}
			_ = l.Unlock(t.Context())
		})
	}
}
