package etcdlock_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/embedetcd"
	"github.com/dlock/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

type harness struct {
	endpoints []string
	drivertest.Clients
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
	cu := &drivertest.Cutter{}
	cli, err := newClientv3(h.endpoints, cu.DialAddr)
	if err != nil {
		return nil, err
	}
	c, err := etcdlock.Open(ctx, cli, etcdlock.Options{CloseClient: true})
	return h.Opened(c, cu, err, func() { _ = cli.Close() })
}

func (h *harness) Caps() drivertest.Caps {
	// etcd's lessor checks expiries every 500ms: 1s of slack.
	return drivertest.Caps{TTL: 2 * time.Second, Slack: time.Second, QueueInStore: true,
		List: drivertest.ListCaps{Labels: true, TTL: true, Waiters: true}}
}

// Driver gives the suite c's driver (drivertest.DriverHarness).
func (h *harness) Driver(c *dlock.Client) driver.Driver { return etcdlock.DriverOf(c) }

// debianHarness is the harness of Debian's etcd, which the suite also
// reaches over TLS and as a user with the package doc's grant.
type debianHarness struct{ *harness }

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
		return &harness{endpoints: eps}, nil
	})
}

func TestConformanceDebianEtcd(t *testing.T) {
	srv := testserver.Etcd(t)
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return debianHarness{&harness{endpoints: []string{"http://" + srv.Addr()}}}, nil
	})
}
