package mysqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
	"github.com/go-sql-driver/mysql"
)

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
	srv  *testserver.Server
	addr string
	mode mysqllock.Mode
	drivertest.Clients
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	db, err := newDB(h.addr, "dlock", cu.DialAddr)
	if err != nil {
		return nil, err
	}
	c, err := mysqllock.Open(ctx, db, mysqllock.Options{Mode: h.mode, CloseDB: true})
	return h.Opened(c, cu, err, func() { _ = db.Close() })
}

func (h *harness) Caps() drivertest.Caps {
	if h.mode == mysqllock.ModeTable {
		return drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 200 * time.Millisecond, StoreReentrant: true,
			List: drivertest.ListCaps{Labels: true, TTL: true}}
	}
	return drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 300 * time.Millisecond, ConnBound: true, NoLabels: true}
}

// tableHarness is the table mode's harness, which the suite also reaches
// over TLS (where session mode is checked too).
type tableHarness struct{ *harness }

func TestConformance(t *testing.T) {
	srv := testserver.MariaDB(t)
	testserver.MariaDBURL(t, srv, "dlock")
	for _, mode := range []mysqllock.Mode{mysqllock.ModeTable, mysqllock.ModeRow, mysqllock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
				h := &harness{srv: srv, addr: srv.Addr(), mode: mode}
				if mode == mysqllock.ModeTable {
					return tableHarness{h}, nil
				}
				return h, nil
			})
		})
	}
}
