package natslock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// On an R3 bucket, killing the stream's leader under a held lock neither
// frees the lock nor ends the lease (its TTL is above the election time);
// a waiter queued before the kill gets the lock once the holder unlocks,
// with a greater token.
//
// It used to hang, 2 runs of 6 under -race, for its whole 90 s: its first
// TryLock after the kill had the test's ctx, and a write caught by the
// leader's death (forwarded to the dead node, or in flight on a client's
// connection to it) is never answered, so that one TryLock waited 90 s.
// Each try now has 5 s of its own, and only a try that was answered counts.
func TestR3LeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 3-node cluster and a leader election")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	nodes := testserver.NATSCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	url := "nats://" + strings.Join(addrs, ",") + "/r3?replicas=3"
	open := func() *dlock.Client {
		c, err := dlock.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a, b, c := open(), open(), open()
	const ttl = 20 * time.Second
	la, err := a.Mutex("k", dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := b.Mutex("k", dlock.WithTTL(ttl)).Lock(ctx)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	for {
		if info, err := a.Inspect(ctx, "k"); err == nil && info.Waiters == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the waiter never queued")
		case <-time.After(20 * time.Millisecond):
		}
	}
	leader := testserver.NATSStreamLeader(ctx, nodes, "KV_r3")
	if leader == nil {
		t.Fatal("no stream leader")
	}
	leader.Kill()
	for {
		// Each try bounded: a write that reaches the stream while it has
		// no leader gets no reply at all (the followers drop it), so one
		// try with the test's ctx would wait out the whole test.
		tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.Mutex("k").TryLock(tctx)
		answered := tctx.Err() == nil // a try cut short is ErrNotAcquired too
		tcancel()
		if errors.Is(err, dlock.ErrNotAcquired) && answered {
			break // the new leader answers, and the lock is still held
		}
		if err == nil {
			t.Fatal("the lock was free after the leader was killed")
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no answer after the leader kill: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	select {
	case <-la.Done():
		t.Fatalf("the lease ended with the leader: %v", la.Err())
	default:
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the leader kill: %v", err)
	}
	lb := <-got
	if lb == nil {
		return
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("waiter's token %d is not above %d", lb.Token(), la.Token())
	}
	_ = lb.Unlock(ctx)
}
