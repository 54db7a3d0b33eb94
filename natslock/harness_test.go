package natslock_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/natslock"
	"github.com/nats-io/nats.go"
)

// dialer adapts a Cutter to nats.CustomDialer.
type dialer struct{ cu *drivertest.Cutter }

func (d dialer) Dial(network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return d.cu.Dial(ctx, network, addr)
}

type harness struct {
	url    string
	bucket string
	inbox  string // a custom reply inbox prefix, if not ""
	drivertest.Clients
}

func connect(url string, opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect(url, append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond),
		nats.ReconnectBufSize(-1)}, opts...)...)
}

// waitQueued polls c's Inspect of name until a waiter is queued on it, and
// returns what Inspect said then.
func waitQueued(t *testing.T, ctx context.Context, c *dlock.Client, name string) dlock.Info {
	t.Helper()
	return waitWaiters(t, ctx, c, name, 1)
}

// waitWaiters polls c's Inspect of name until n waiters are queued on it
// (while it is held), and returns what Inspect said then.
func waitWaiters(t *testing.T, ctx context.Context, c *dlock.Client, name string, n int) dlock.Info {
	t.Helper()
	for {
		info, err := c.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters >= n {
			return info
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	opts := []nats.Option{nats.SetCustomDialer(dialer{cu})}
	if h.inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(h.inbox))
	}
	nc, err := connect(h.url, opts...)
	if err != nil {
		return nil, err
	}
	c, err := natslock.Open(ctx, nc, natslock.Options{Bucket: h.bucket, CloseConn: true})
	if err != nil {
		nc.Close()
		return nil, err
	}
	h.Track(c, cu)
	return c, nil
}

func (h *harness) Remove(ctx context.Context, name string) error {
	return drivertest.RemoveWith(ctx, h.NewClient, name)
}

func (h *harness) Caps() drivertest.Caps {
	// TTLs are whole seconds; the server expires a key on a timer of its own.
	return drivertest.Caps{TTL: 2 * time.Second, Slack: time.Second, QueueInStore: true,
		List: drivertest.ListCaps{Labels: true, TTL: true}}
}

func newHarness(url string) drivertest.NewHarness {
	return func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{url: url, bucket: "dlocktest"}, nil
	}
}

// TestConformance runs the whole suite, elections, LockAll and List
// included, then its TLS section (TLS) and again as a user with only the
// package doc's Permissions (LeastPrivilege).
func TestConformance(t *testing.T) {
	srv := testserver.NATSProcess(t)
	drivertest.Run(t, newHarness("nats://"+srv.Addr()))
}
