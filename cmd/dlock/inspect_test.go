package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// TestInspectText: inspect does not contradict itself nor print blanks.
// A free mutex next to a held read-write lock says "(mutex): free"; a lock
// held by `etcdctl lock` (no owner id, no label) names "an owner the
// backend does not name"; ZooKeeper's unknown time left is said, not "0s".
func TestInspectText(t *testing.T) {
	t.Run("mutex free, readers", func(t *testing.T) {
		u := redisURL(t)
		if _, err := drivertest.MustOpen(t, u).RWMutex("reports/x").RLock(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := dlockCmd(t, nil, "inspect", "--backend", u, "reports/x")
		if r.code != 0 || !strings.Contains(r.stdout, "reports/x (mutex): free\n") || !strings.Contains(r.stdout, "(read-write): 1 readers") {
			t.Errorf("inspect: exit %d\n%s", r.code, r.stdout)
		}
	})
	t.Run("etcdctl holder", func(t *testing.T) {
		srv := testserver.Etcd(t)
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Addr()}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := concurrency.NewMutex(s, "ext").Lock(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := dlockCmd(t, nil, "inspect", "--backend", "etcd://"+srv.Addr(), "ext")
		if r.code != 0 || !strings.Contains(r.stdout, "ext: held by an owner the backend does not name (") || strings.Contains(r.stdout, "  ") {
			t.Errorf("inspect: exit %d\n%s", r.code, r.stdout)
		}
	})
	t.Run("zk time left", func(t *testing.T) {
		u := "zk://" + testserver.ZooKeeper(t).Addr()
		if _, err := drivertest.MustOpen(t, u).Mutex("zx", dlock.WithLabel("w")).Lock(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := dlockCmd(t, nil, "inspect", "--backend", u, "zx")
		if r.code != 0 || strings.Contains(r.stdout, "0s left") || !strings.Contains(r.stdout, "time left unknown") {
			t.Errorf("inspect: exit %d\n%s", r.code, r.stdout)
		}
		// The read-write lock's and semaphore's holders too (they said "0s left").
		c := drivertest.MustOpen(t, u)
		if _, err := c.RWMutex("zk-rw").RLock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Semaphore("zk-sem", 2).Acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"zk-rw", "zk-sem"} {
			r := dlockCmd(t, nil, "inspect", "--backend", u, name)
			if r.code != 0 || strings.Contains(r.stdout, "0s left") || !strings.Contains(r.stdout, "time left unknown") {
				t.Errorf("inspect %s: exit %d\n%s", name, r.code, r.stdout)
			}
		}
	})
}
