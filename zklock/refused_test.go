package zklock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TestOpenRefusedSaysSo: Open of a URL whose every server refuses the
// connection fails at once with the refusal, as the Redis and etcd
// backends do. It waited for a session until its ctx ended (at most 10 s)
// and said "context deadline exceeded" (the CLI: "no answer within 5s").
// One refusing server beside a live one is no reason to give up.
func TestOpenRefusedSaysSo(t *testing.T) {
	p1, p2 := testserver.ClosedAddr(t), testserver.ClosedAddr(t)
	for _, u := range []string{
		"zk://" + p1,
		fmt.Sprintf("zk://%s,%s/chroot", p1, p2),
		fmt.Sprintf("zk://%s,%s", p1, p1),
		"zk://" + p1 + "?tls=true&insecure_skip_verify=true",
	} {
		// go-zookeeper waits 1 s between rounds of its servers; the
		// refusal comes in the first round. Generous for a loaded machine.
		drivertest.WantOpenRefused(t, u, 2500*time.Millisecond)
	}
	z := testserver.ZooKeeper(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := dlock.Open(ctx, fmt.Sprintf("zk://%s,%s", p1, z.Addr()))
	if err != nil {
		t.Fatalf("a refusing server beside a live one: %v", err)
	}
	l, err := c.Mutex("refused-beside-live").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	_ = l.Unlock(ctx)
	_ = c.Close()
}
