package pglock_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

type harness struct {
	srv  *testserver.Server
	url  string
	mode pglock.Mode
	drivertest.Clients
}

// pool opens a pool of url whose connects give up after connect: a
// second where a test's proxy may blackhole them, more in the conformance
// suite, whose clients connect while the machine may be loaded (PostgreSQL
// forks a backend for each connection).
func pool(ctx context.Context, url string, dial func(context.Context, string, string) (net.Conn, error), connect time.Duration) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 32
	cfg.ConnConfig.ConnectTimeout = connect
	if dial != nil {
		cfg.ConnConfig.DialFunc = dial
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	p, err := pool(ctx, h.url, cu.Dial, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c, err := pglock.Open(ctx, p, pglock.Options{Mode: h.mode, ClosePool: true})
	return h.Opened(c, cu, err, func() { p.Close() })
}

func (h *harness) Caps() drivertest.Caps {
	if h.mode == pglock.ModeTable {
		return drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 150 * time.Millisecond, StoreReentrant: true,
			List: drivertest.ListCaps{Labels: true, TTL: true}}
	}
	return drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 300 * time.Millisecond, ConnBound: true, NoLabels: true,
		List: drivertest.ListCaps{Waiters: true}}
}

// tableHarness is the table mode's harness, which the suite also reaches
// over TLS (where session mode is checked too).
type tableHarness struct{ *harness }

func TestConformance(t *testing.T) {
	srv := testserver.Postgres(t)
	for _, mode := range []pglock.Mode{pglock.ModeTable, pglock.ModeRow, pglock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
				h := &harness{srv: srv, url: testserver.PostgresURL(srv), mode: mode}
				if mode == pglock.ModeTable {
					return tableHarness{h}, nil
				}
				return h, nil
			})
		})
	}
}
