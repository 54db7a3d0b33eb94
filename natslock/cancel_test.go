package natslock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// A queued Lock whose link goes silent and whose ctx then ends returns by
// the 2 s Mutex.Lock's doc gives, with ctx's error: its clean-up steps had a
// 2 s bound each, and its watch's unsubscribe waited on nats.go's 5 s
// request timeout, so it returned some 9 s late (an adversary pass). The
// queue key it could not drop blocks nobody past its TTL.
func TestCancelledWaitOnSilentLink(t *testing.T) {
	srv := testserver.NATSProcess(t)
	ctx := t.Context()
	holder, err := dlock.Open(ctx, "nats://"+srv.Addr()+"/cancel")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	const ttl = 3 * time.Second
	l, err := holder.Mutex("c", dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	px := testserver.NewProxy(t, srv.Addr())
	w, err := dlock.Open(ctx, "nats://"+px.Addr()+"/cancel?discovered=false")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := w.Mutex("c", dlock.WithTTL(ttl)).Lock(wctx)
		done <- err
	}()
	waitQueued(t, ctx, holder, "c")
	px.Blackhole()
	time.Sleep(100 * time.Millisecond)
	ended := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Errorf("Lock: %v; want ErrNotAcquired and context.Canceled", err)
		}
		// 2 s, with room for a loaded machine; it was 9 s.
		if late := time.Since(ended); late > 4*time.Second {
			t.Errorf("Lock returned %v after its ctx ended", late.Round(time.Millisecond))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Lock did not return 15 s after its ctx ended")
	}
	px.Close()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 3*ttl)
	defer lcancel()
	l2, err := holder.Mutex("c", dlock.WithTTL(ttl)).Lock(lctx)
	if err != nil {
		t.Fatalf("Lock after the cut waiter's queue key outlived it: %v", err)
	}
	_ = l2.Unlock(ctx)
}
