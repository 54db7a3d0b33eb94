package embedetcd

import (
	"context"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func TestSingleMember(t *testing.T) {
	m, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := m.Dir
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	m.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data dir %s left behind: %v", dir, err)
	}
}

// A member whose port another process took fails with an error that
// StartCluster recognises, so it starts again on new ports.
func TestPortTakenIsRecognised(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	u := url.URL{Scheme: "http", Host: l.Addr().String()}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{u}, []url.URL{u}
	m := &Member{Name: "m0", cfg: cfg}
	err = m.start(10 * time.Second)
	if err == nil {
		m.Stop()
		t.Fatal("a member started on a port in use")
	}
	if !portTaken(err) {
		t.Fatalf("start on a port in use: %v; not recognised as a port taken", err)
	}
}
