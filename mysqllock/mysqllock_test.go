package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
	"github.com/go-sql-driver/mysql"
)

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

var nets atomic.Int64

// newDB opens a pool whose connections go through dial (a network name of
// its own, as go-sql-driver registers dialers by name).
func newDB(addr, dbName string, dial func(context.Context, string) (net.Conn, error)) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Addr, cfg.DBName, cfg.ParseTime = "root", addr, dbName, true
	cfg.Timeout = time.Second
	cfg.Net = "tcp"
	if dial != nil {
		cfg.Net = fmt.Sprintf("dlocktest%d", nets.Add(1))
		mysql.RegisterDialContext(cfg.Net, dial)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

type harness struct {
	addr    string
	mode    mysqllock.Mode
	mu      sync.Mutex
	cutters map[*dlock.Client]*cutter
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &cutter{}
	db, err := newDB(h.addr, "dlock", cu.dial)
	if err != nil {
		return nil, err
	}
	c, err := mysqllock.Open(ctx, db, mysqllock.Options{Mode: h.mode, CloseDB: true})
	if err != nil {
		_ = db.Close()
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
	if h.mode == mysqllock.ModeTable {
		return drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 200 * time.Millisecond, StoreReentrant: true}
	}
	return drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 300 * time.Millisecond, ConnBound: true}
}

func TestConformance(t *testing.T) {
	srv := testserver.MariaDB(t)
	testserver.MariaDBURL(t, srv, "dlock")
	for _, mode := range []mysqllock.Mode{mysqllock.ModeTable, mysqllock.ModeRow, mysqllock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
				return &harness{addr: srv.Addr(), mode: mode, cutters: map[*dlock.Client]*cutter{}}, nil
			})
		})
	}
}
