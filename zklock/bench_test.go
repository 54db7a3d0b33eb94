package zklock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/go-zookeeper/zk"
)

// BenchmarkLockUnlock is uncontended Lock+Unlock on a ready parent.
func BenchmarkLockUnlock(b *testing.B) {
	srv := testserver.ZooKeeper(b)
	h := &harness{addr: srv.Addr()}
	drivertest.LockUnlock(b, drivertest.Client(b, h), "bench/u")
}

// BenchmarkPlainCreateDelete is the limit BenchmarkLockUnlock is measured
// against: an ephemeral sequential node created and deleted, nothing more.
func BenchmarkPlainCreateDelete(b *testing.B) {
	srv := testserver.ZooKeeper(b)
	conn := rawConn(b, srv.Addr())
	acl := zk.WorldACL(zk.PermAll)
	if _, err := conn.Create("/plain", nil, 0, acl); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		node, err := conn.Create("/plain/n-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
		if err != nil {
			b.Fatal(err)
		}
		if err := conn.Delete(node, -1); err != nil {
			b.Fatal(err)
		}
	}
}
