package pglock_test

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
	"github.com/dlock/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
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
	url     string
	mode    pglock.Mode
	mu      sync.Mutex
	cutters map[*dlock.Client]*cutter
}

func pool(ctx context.Context, url string, dial func(context.Context, string, string) (net.Conn, error)) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 32
	cfg.ConnConfig.ConnectTimeout = time.Second
	if dial != nil {
		cfg.ConnConfig.DialFunc = dial
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &cutter{}
	p, err := pool(ctx, h.url, cu.dial)
	if err != nil {
		return nil, err
	}
	c, err := pglock.Open(ctx, p, pglock.Options{Mode: h.mode, ClosePool: true})
	if err != nil {
		p.Close()
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
	if h.mode == pglock.ModeTable {
		return drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 150 * time.Millisecond, StoreReentrant: true}
	}
	return drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 300 * time.Millisecond, ConnBound: true}
}

func TestConformance(t *testing.T) {
	srv := testserver.Postgres(t)
	for _, mode := range []pglock.Mode{pglock.ModeTable, pglock.ModeRow, pglock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
				return &harness{url: testserver.PostgresURL(srv), mode: mode, cutters: map[*dlock.Client]*cutter{}}, nil
			})
		})
	}
}
