package zklock_test

import (
	"bytes"
	"testing"

	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// TestLockNodeWrite: a client writes a lock's node (with empty data, in the
// create's transaction) only when it has seen that the node holds no data,
// and goes on creating its nodes alone where the ACL forbids the write.
func TestLockNodeWrite(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	h := &harness{addr: srv.Addr()}
	ctx := t.Context()
	admin := rawConn(t, srv.Addr())
	lockThrice := func(t *testing.T, name string) int64 {
		t.Helper()
		c, err := h.NewClient(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m := c.Mutex(name)
		for range 3 {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return zklock.StatTokens(c)
	}

	t.Run("empty", func(t *testing.T) {
		if n := lockThrice(t, "parent/empty"); n != 2 {
			t.Errorf("%d of 3 Locks created in the multi; want the 2 after the first", n)
		}
	})

	t.Run("data kept", func(t *testing.T) {
		if _, err := admin.Create("/parent", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
		if _, err := admin.Create("/parent/data", []byte("keep"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if n := lockThrice(t, "parent/data"); n != 0 {
			t.Errorf("%d Locks wrote a lock node that holds data", n)
		}
		data, _, err := admin.Get("/parent/data")
		if err != nil || !bytes.Equal(data, []byte("keep")) {
			t.Errorf("the lock node's data is %q, %v; want it kept", data, err)
		}
	})

	t.Run("no write permission", func(t *testing.T) {
		acl := zk.WorldACL(zk.PermRead | zk.PermCreate | zk.PermDelete)
		if _, err := admin.Create("/parent/nowrite", nil, 0, acl); err != nil {
			t.Fatal(err)
		}
		if n := lockThrice(t, "parent/nowrite"); n != 0 {
			t.Errorf("%d Locks wrote a lock node without write permission", n)
		}
	})
}
