package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// silentNodes returns a driver over three Redis servers, the last two
// behind proxies, which it returns for the test to silence.
func silentNodes(t *testing.T) (*redlockDriver, []*testserver.Proxy) {
	t.Helper()
	var clients []redis.UniversalClient
	var px []*testserver.Proxy
	for i := range 3 {
		addr := testserver.Redis(t).Addr()
		if i > 0 {
			p := testserver.NewProxy(t, addr)
			px = append(px, p)
			addr = p.Addr()
		}
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	d, err := newDriver(t.Context(), clients, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return d, px
}

// A silent node's subscription is tried again in the background, and
// Close does not wait for it: a Lock closes its subscription after its
// grant, and returned 4.5–6 s late with a node blackholed while a first
// version of the retries held go-redis's reconnection (an adversary pass).
// Nothing is left running after Close either way.
func TestCloseWithASilentNodeIsPrompt(t *testing.T) {
	d, px := silentNodes(t)
	opts := goleak.IgnoreCurrent()
	px[1].Blackhole()
	for _, after := range []time.Duration{0, 1300 * time.Millisecond} {
		t0 := time.Now()
		s, err := d.Subscribe(t.Context(), "silent")
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(t0); took > 1500*time.Millisecond {
			t.Errorf("Subscribe with a node silent took %v; the node has a second", took)
		}
		time.Sleep(after) // a retry under way
		t0 = time.Now()
		_ = s.Close()
		if took := time.Since(t0); took > 300*time.Millisecond {
			t.Errorf("Close %v after Subscribe, with a node silent, took %v", after, took)
		}
	}
	goleak.VerifyNone(t, opts)
}

// A Subscribe whose ctx is cancelled returns at once, though silent nodes
// are still within their second (go-redis heeds only deadlines), and
// leaves nothing behind once their second is over.
func TestCancelledSubscribeIsPrompt(t *testing.T) {
	d, px := silentNodes(t)
	opts := goleak.IgnoreCurrent()
	px[0].Blackhole()
	px[1].Blackhole()
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	t0 := time.Now()
	_, err := d.Subscribe(ctx, "cancelled")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Subscribe cancelled: %v, want context.Canceled", err)
	}
	if took := time.Since(t0); took > 500*time.Millisecond {
		t.Errorf("Subscribe cancelled at 100ms returned after %v", took)
	}
	time.Sleep(time.Until(t0.Add(subscribeTimeout + 200*time.Millisecond))) // the silent nodes' second is over
	goleak.VerifyNone(t, opts)
}
