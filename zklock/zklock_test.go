package zklock_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

const sessionTimeout = 2 * time.Second

type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func (c *cutter) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("connections cut by the test")
	}
	conn, err := net.DialTimeout(network, addr, timeout)
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

type quiet struct{}

func (quiet) Printf(string, ...any) {}

type harness struct {
	addr    string
	mu      sync.Mutex
	cutters map[*dlock.Client]*cutter
}

func connect(addr string, dial zk.Dialer) (*zk.Conn, <-chan zk.Event, error) {
	if dial != nil {
		return zk.Connect([]string{addr}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithDialer(dial))
	}
	return zk.Connect([]string{addr}, sessionTimeout, zk.WithLogger(quiet{}))
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &cutter{}
	conn, events, err := connect(h.addr, cu.dial)
	if err != nil {
		return nil, err
	}
	c, err := zklock.Open(ctx, conn, zklock.Options{SessionTimeout: sessionTimeout, Events: events, CloseConn: true})
	if err != nil {
		conn.Close()
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
	// The server expires a dead session within a tick or two of its timeout.
	return drivertest.Caps{TTL: sessionTimeout, Slack: time.Second, QueueInStore: true, SessionBound: true}
}

func TestConformance(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{addr: srv.Addr(), cutters: map[*dlock.Client]*cutter{}}, nil
	})
}
