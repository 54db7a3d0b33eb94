package natslock_test

import (
	"context"
	"errors"
	"os"
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
func TestR3LeaderKill(t *testing.T) {
	// Opt-in for now: under -race on a loaded 2-core machine, 2 runs of 6
	// saw the two surviving nodes not answer for the whole 90 s (not yet
	// understood); the fault suite's nats×3 × kill-leader row covers the
	// same ground in make faults.
	if testing.Short() || os.Getenv("DLOCK_NATS_CLUSTER") != "1" {
		t.Skip("set DLOCK_NATS_CLUSTER=1: a 3-node cluster and a leader election")
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
		_, err := c.Mutex("k").TryLock(ctx)
		if errors.Is(err, dlock.ErrNotAcquired) {
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
