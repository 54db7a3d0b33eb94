package memcachedlock_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/memcachedlock"
)

type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("connections cut by the test")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
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
	addr    string
	mu      sync.Mutex
	cutters map[*dlock.Client]*cutter
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &cutter{}
	mc := memcache.New(h.addr)
	mc.DialContext = cu.dial
	mc.Timeout = 500 * time.Millisecond
	c, err := memcachedlock.Open(ctx, mc, memcachedlock.Options{CloseClient: true})
	if err != nil {
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
	// Expiry has one-second resolution and may come a second early.
	return drivertest.Caps{TTL: 2 * time.Second, Slack: 1200 * time.Millisecond, EarlyExpiry: time.Second, StoreReentrant: true}
}

func TestConformance(t *testing.T) {
	srv := testserver.Memcached(t)
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{addr: srv.Addr(), cutters: map[*dlock.Client]*cutter{}}, nil
	})
}

// A restart of memcached drops every lock: the holder learns of it at its
// next renewal.
func TestRestartLosesLocks(t *testing.T) {
	srv := testserver.Memcached(t)
	c, err := dlock.Open(t.Context(), "memcached://"+srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const ttl = 3 * time.Second
	l, err := c.Mutex("restart", dlock.WithTTL(ttl)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
			t.Fatalf("Err = %v", l.Err())
		}
	case <-time.After(ttl):
		t.Fatal("lease live after memcached restarted")
	}
}

func TestTTLLimits(t *testing.T) {
	srv := testserver.Memcached(t)
	c, err := dlock.Open(t.Context(), "memcached://"+srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, ttl := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 31 * 24 * time.Hour} {
		if _, err := c.Mutex("ttl", dlock.WithTTL(ttl)).TryLock(t.Context()); !errors.Is(err, dlock.ErrInvalidTTL) {
			t.Errorf("TTL %v: %v; want ErrInvalidTTL", ttl, err)
		}
	}
	if _, err := dlock.Open(t.Context(), "memcached://"+srv.Addr()+"?bogus=1"); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("bad parameter: %v", err)
	}
}
