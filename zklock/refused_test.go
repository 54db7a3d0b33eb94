package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dlock/dlock"
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
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		start := time.Now()
		c, err := dlock.Open(ctx, u)
		took := time.Since(start)
		cancel()
		if err == nil {
			_ = c.Close()
			t.Fatalf("%s: Open succeeded", u)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: %v; want the refusal", u, err)
		}
		// go-zookeeper waits 1 s between rounds of its servers; the
		// refusal comes in the first round. Generous for a loaded machine.
		if took > 2500*time.Millisecond {
			t.Errorf("%s: Open took %v to say %v", u, took.Round(time.Millisecond), err)
		}
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
