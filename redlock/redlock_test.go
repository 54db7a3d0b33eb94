package redlock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

type harness struct {
	addrs []string
	drivertest.Clients
}

func (h *harness) clients(dial func(context.Context, string, string) (net.Conn, error)) []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(h.addrs))
	for i, a := range h.addrs {
		cs[i] = redis.NewClient(&redis.Options{Addr: a, Dialer: dial, MaxRetries: -1,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	}
	return cs
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	// The default node timeout at the suite's 500 ms TTL is 25 ms, which a
	// loaded 2-core CI machine running -race overshoots now and then (no
	// quorum, so Lock failed); the suite tests locking, not latency.
	c, err := redlock.Open(ctx, h.clients(cu.Dial), redlock.Options{CloseClients: true, NodeTimeout: 150 * time.Millisecond})
	return h.Opened(c, cu, err, nil)
}

func (h *harness) Caps() drivertest.Caps {
	return drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 100 * time.Millisecond, StoreReentrant: true,
		NoList: "each node keeps its own copy of a lock and their lists may disagree"}
}

func fiveNodes(t *testing.T) ([]*testserver.Server, []string) {
	var srvs []*testserver.Server
	var addrs []string
	for range 5 {
		s := testserver.Redis(t)
		srvs = append(srvs, s)
		addrs = append(addrs, s.Addr())
	}
	return srvs, addrs
}

func TestConformance(t *testing.T) {
	_, addrs := fiveNodes(t)
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{addrs: addrs}, nil
	})
}

func open(t *testing.T, addrs []string) *dlock.Client {
	t.Helper()
	return drivertest.MustOpen(t, "redlock://"+strings.Join(addrs, ","))
}

// With 2 of 5 nodes down locking goes on; with 3 down Lock fails by its
// deadline and nothing is granted.
func TestMinorityAndMajorityDown(t *testing.T) {
	srvs, addrs := fiveNodes(t)
	a, b := open(t, addrs), open(t, addrs)
	ctx := t.Context()
	srvs[0].Stop()
	srvs[1].Stop()
	l, err := a.Mutex("quorum").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock with 3 of 5 nodes: %v", err)
	}
	if _, err := b.Mutex("quorum").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("second holder with 3 of 5 nodes: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	srvs[2].Stop()
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if l, err := a.Mutex("quorum").Lock(lctx); err == nil {
		_ = l.Unlock(ctx)
		t.Fatal("Lock granted with 2 of 5 nodes")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with 2 of 5 nodes: %v; want the deadline", err)
	}
}

// A node slower than the per-node timeout does not stop the lock: the
// majority answers in time.
func TestSlowNode(t *testing.T) {
	_, addrs := fiveNodes(t)
	const delay = 5 * time.Second // far past the node timeout, so no load on the machine blurs the two
	slow := testserver.NewProxy(t, addrs[4])
	slow.SetDelay(delay / 2) // each way: a round trip takes delay
	addrs[4] = slow.Addr()
	c := drivertest.MustOpen(t, "redlock://"+strings.Join(addrs, ",")+"?node_timeout=1s")
	// A Lock that waited for the slow node would wait on (each grant comes
	// back too late): the deadline makes that a failure, not a hang.
	ctx, cancel := context.WithTimeout(t.Context(), 2*delay)
	defer cancel()
	start := time.Now()
	l, err := c.Mutex("slow", dlock.WithTTL(5*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock with one slow node: %v after %v", err, time.Since(start))
	}
	if d := time.Since(start); d >= delay {
		t.Fatalf("Lock took %v: waited for the slow node", d)
	}
	_ = l.Unlock(t.Context())
}

// Nodes restarted empty can rewind fencing tokens: the documented
// limit of Redlock without fsync'd persistence.
func TestRestartedNodesCanRewindTokens(t *testing.T) {
	srvs, addrs := fiveNodes(t)
	c := open(t, addrs)
	ctx := t.Context()
	var last uint64
	for range 5 {
		l, err := c.Mutex("rewind").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last = l.Token()
		_ = l.Unlock(ctx)
	}
	// A majority restarts without persistence while the other two are down.
	srvs[3].Stop()
	srvs[4].Stop()
	for _, s := range srvs[:3] {
		s.Stop()
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.Mutex("rewind").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if l.Token() > last {
		t.Fatalf("token %d after %d: expected the rewind this test documents", l.Token(), last)
	}
	t.Logf("token went from %d back to %d after a majority restarted empty", last, l.Token())
}

func TestOpenRefusesBadNodeSets(t *testing.T) {
	ctx := t.Context()
	for _, u := range []string{"redlock://127.0.0.1:1,127.0.0.1:2", "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:1"} {
		if _, err := dlock.Open(ctx, u); !errors.Is(err, dlock.ErrInvalidConfig) {
			t.Errorf("Open(%q) = %v; want ErrInvalidConfig", u, err)
		}
	}
	if _, err := dlock.Open(ctx, "redlock://h1:1,h2:2,h3:3?bogus=1"); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("unknown parameter: %v", err)
	}
}
