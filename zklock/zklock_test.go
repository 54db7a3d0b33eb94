package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

const sessionTimeout = 2 * time.Second

type quiet struct{}

func (quiet) Printf(string, ...any) {}

type harness struct {
	addr string
	drivertest.Clients
}

func connect(addr string, dial zk.Dialer) (*zk.Conn, <-chan zk.Event, error) {
	if dial != nil {
		return zk.Connect([]string{addr}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithDialer(dial))
	}
	return zk.Connect([]string{addr}, sessionTimeout, zk.WithLogger(quiet{}))
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	conn, events, err := connect(h.addr, cu.DialTimeout)
	if err != nil {
		return nil, err
	}
	c, err := zklock.Open(ctx, conn, zklock.Options{SessionTimeout: sessionTimeout, Events: events, CloseConn: true})
	if err != nil {
		conn.Close()
		return nil, err
	}
	h.Track(c, cu)
	return c, nil
}

func (h *harness) Remove(ctx context.Context, name string) error {
	return drivertest.RemoveWith(ctx, h.NewClient, name)
}

func (h *harness) Caps() drivertest.Caps {
	// The server expires a dead session within a tick or two of its timeout.
	return drivertest.Caps{TTL: sessionTimeout, Slack: time.Second, QueueInStore: true, SessionBound: true}
}

func TestConformance(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{addr: srv.Addr()}, nil
	})
}

// dlock and go-zookeeper's zk.Lock, which sorts the same lock-<seq>
// children, exclude each other on the same path.
func TestZkLockInterop(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	h := &harness{addr: srv.Addr()}
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
	h := &harness{addr: srv.Addr()}
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
