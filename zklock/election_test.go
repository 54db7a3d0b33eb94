package zklock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Apache Curator's LeaderLatch and dlock's Election elect one leader on one
// path, both ways, and each reads the other's leader's id (value).
func TestCuratorLeaderLatchInterop(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	c := drivertest.Client(t, &harness{addr: srv.Addr()})
	ctx := t.Context()
	e := c.Election("interop/latch", dlock.WithTTL(sessionTimeout))

	// Curator leads: dlock reads its id and waits behind it.
	cur := startCuratorProgram(t, "testdata/CuratorLatch.java", srv.Addr(), "/interop/latch", "curator-1")
	if got := cur.send("start", 30*time.Second); got != "started" {
		t.Fatalf("curator start: %q", got)
	}
	if got := cur.send("await 30000", 40*time.Second); got != "leader" {
		t.Fatalf("curator await: %q", got)
	}
	ld, err := e.Leader(ctx)
	if err != nil || ld.Value != "curator-1" {
		t.Fatalf("Leader while Curator leads = %+v, %v; want curator-1", ld, err)
	}
	campaign := drivertest.Go(func() (*dlock.Term, error) { return e.Campaign(ctx, "dlock-1") })
	campaign.WantPending(t, time.Second, "dlock's Campaign while Curator leads")
	if got := cur.send("close", 10*time.Second); got != "closed" {
		t.Fatalf("curator close: %q", got)
	}
	term := campaign.Want(t, 10*time.Second, "dlock's Campaign after Curator's latch closed")
	if term.Token() <= ld.Term {
		t.Fatalf("dlock's term %d is not above Curator's %d", term.Token(), ld.Term)
	}

	// dlock leads: a Curator latch waits, reads dlock's value as the
	// leader's id, and leads once dlock resigns.
	cur2 := startCuratorProgram(t, "testdata/CuratorLatch.java", srv.Addr(), "/interop/latch", "curator-2")
	if got := cur2.send("start", 30*time.Second); got != "started" {
		t.Fatalf("curator start: %q", got)
	}
	if got := cur2.send("await 1000", 10*time.Second); got != "not" {
		t.Fatalf("curator await while dlock leads: %q", got)
	}
	if got := cur2.send("leader", 10*time.Second); got != "dlock-1" {
		t.Fatalf("curator's getLeader while dlock leads: %q; want dlock-1", got)
	}
	// Rewriting the leader's data would fire the watch Curator's waiter
	// keeps on it, which it does not set again: it would never lead.
	if err := term.Proclaim(ctx, "dlock-2"); !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("Proclaim on ZooKeeper: %v; want ErrUnsupported", err)
	} else if msg := err.Error(); strings.Count(msg, "proclaim") != 1 || strings.Count(msg, "unsupported") != 1 {
		t.Fatalf("Proclaim on ZooKeeper: %q; want one prefix and one statement of the cause", msg)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cur2.send("await 10000", 20*time.Second); got != "leader" {
		t.Fatalf("curator await after dlock resigned: %q", got)
	}
	ld2, err := e.Leader(ctx)
	if err != nil || ld2.Value != "curator-2" || ld2.Term <= term.Token() {
		t.Fatalf("Leader after dlock resigned = %+v, %v; want curator-2 in a later term than %d", ld2, err, term.Token())
	}
	if got := cur2.send("close", 10*time.Second); got != "closed" {
		t.Fatalf("curator close: %q", got)
	}
	// Curator's LeaderLatch.close deletes its node in the background (a
	// guaranteed delete), so "closed" can come before the node is gone: wait
	// for it, within a bound.
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := e.Leader(ctx)
		if errors.Is(err, dlock.ErrNoLeader) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Leader 10s after everyone resigned: %v; want ErrNoLeader", err)
		}
		time.Sleep(20 * time.Millisecond) // polling: Curator's delete is out of our sight
	}
}
