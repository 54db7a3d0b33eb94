package dlock

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
)

// lateAnswer applies a Release at once and answers it late, as over a
// link with latency: the store has let go before the client hears so.
type lateAnswer struct {
	*fakeDriver
	delay time.Duration
}

func (s *lateAnswer) Release(ctx context.Context, h driver.Held, n int) error {
	err := s.fakeDriver.Release(ctx, h, n)
	time.Sleep(s.delay)
	return err
}

// Close ends a hold's leases before it releases the hold in the store. It
// released first: while the release's answer was on its way, another
// client held the lock and the closing client's Do still ran with a live
// ctx (an adversary pass, 100 ms at 100 ms of latency).
func TestCloseEndsLeasesBeforeRelease(t *testing.T) {
	d := newFake()
	c := New(&lateAnswer{d, 200 * time.Millisecond}, "fake", quiet())
	other := New(d, "fake", quiet())
	defer other.Close()
	running := make(chan context.Context, 1)
	done := make(chan error, 1)
	go func() {
		done <- Do(t.Context(), c.Mutex("close-order", WithTTL(time.Minute)), func(ctx context.Context, l *Lease) error {
			running <- ctx
			<-ctx.Done()
			return nil
		})
	}()
	work := <-running
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for {
		if l, err := other.Mutex("close-order", WithTTL(time.Minute)).TryLock(t.Context()); err == nil {
			if work.Err() == nil {
				t.Fatal("another client holds the lock while the closing client's Do runs with a live ctx")
			}
			_ = l.Unlock(t.Context())
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	<-done
}
