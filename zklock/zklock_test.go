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

// dlock and go-zookeeper's zk.Lock, which sorts the same lock-<seq>
// children, exclude each other on the same path.
func TestZkLockInterop(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	h := &harness{addr: srv.Addr(), cutters: map[*dlock.Client]*cutter{}}
	c, err := h.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	conn, _, err := connect(srv.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	first, err := c.Mutex("interop/x").TryLock(ctx) // creates the parents
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	zl := zk.NewLock(conn, "/interop/x", zk.WorldACL(zk.PermAll))
	locked := make(chan error, 1)
	go func() { locked <- zl.Lock() }()
	select {
	case err := <-locked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("zk.Lock did not get a free lock")
	}
	if _, err := c.Mutex("interop/x").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while zk.Lock holds: %v", err)
	}
	if err := zl.Unlock(); err != nil {
		t.Fatal(err)
	}
	l, err := c.Mutex("interop/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		zl2 := zk.NewLock(conn, "/interop/x", zk.WorldACL(zk.PermAll))
		if err := zl2.Lock(); err == nil {
			close(got)
			_ = zl2.Unlock()
		}
	}()
	select {
	case <-got:
		t.Fatal("zk.Lock got the lock while dlock held it")
	case <-time.After(500 * time.Millisecond):
	}
	_ = l.Unlock(ctx)
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("zk.Lock did not get the lock after dlock released it")
	}
}

// Names that are not ZooKeeper paths are refused with ErrInvalidName.
func TestBadNames(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	h := &harness{addr: srv.Addr(), cutters: map[*dlock.Client]*cutter{}}
	c, err := h.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, name := range []string{"a//b", "a/./b", "../x"} {
		if _, err := c.Mutex(name).TryLock(t.Context()); !errors.Is(err, dlock.ErrInvalidName) {
			t.Errorf("TryLock(%q) = %v; want ErrInvalidName", name, err)
		}
	}
}
