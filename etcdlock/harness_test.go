package etcdlock_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/embedetcd"
	"github.com/dlock/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// cutter is a dialer whose connections can all be cut at once, as if the
// process using them had died.
type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func (c *cutter) dial(ctx context.Context, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("connections cut by the test")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cutter) cutAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

type harness struct {
	endpoints []string
	mu        sync.Mutex
	cutters   map[*dlock.Client]*cutter
}

func newClientv3(endpoints []string, dial func(context.Context, string) (net.Conn, error)) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second}
	if dial != nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithContextDialer(dial)}
	}
	return clientv3.New(cfg)
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &cutter{}
	cli, err := newClientv3(h.endpoints, cu.dial)
	if err != nil {
		return nil, err
	}
	c, err := etcdlock.Open(ctx, cli, etcdlock.Options{CloseClient: true})
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	h.mu.Lock()
	h.cutters[c] = cu
	h.mu.Unlock()
	return c, nil
}

func (h *harness) Cut(_ context.Context, c *dlock.Client) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cutters[c].cutAll()
	return nil
}

func (h *harness) Remove(ctx context.Context, name string) error {
	c, err := h.NewClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.ForceUnlock(ctx, name)
}

func (h *harness) Caps() drivertest.Caps {
	// etcd's lessor checks expiries every 500ms: 1s of slack.
	return drivertest.Caps{TTL: 2 * time.Second, Slack: time.Second, QueueInStore: true}
}

func embedded(t *testing.T) []string {
	t.Helper()
	m, err := embedetcd.Start(embedetcd.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return []string{m.ClientURL}
}

func TestConformanceEmbedded(t *testing.T) {
	eps := embedded(t)
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{endpoints: eps, cutters: map[*dlock.Client]*cutter{}}, nil
	})
}

func TestConformanceDebianEtcd(t *testing.T) {
	srv := testserver.Etcd(t)
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{endpoints: []string{"http://" + srv.Addr()}, cutters: map[*dlock.Client]*cutter{}}, nil
	})
}
