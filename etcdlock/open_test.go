package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Open of a URL whose every endpoint refuses the connection says so at
// once (it waited 10 s and said "context deadline exceeded"); one whose
// endpoint accepts and never answers gives up after dial_timeout, not a
// fixed 10 s; a parameter given twice is refused (one of its values was
// used, silently).
func TestOpenBounds(t *testing.T) {
	refusing := testserver.ClosedAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	_, err := dlock.Open(ctx, "etcd://"+refusing)
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Open of a refusing endpoint: %v; want the refusal", err)
	}

	silent := testserver.SilentAddr(t)
	ctx, cancel = context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	start := time.Now()
	_, err = dlock.Open(ctx, "etcd://"+silent+"?dial_timeout=1s")
	if err == nil {
		t.Fatal("Open of a silent endpoint succeeded")
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("Open with dial_timeout=1s of a silent endpoint ran until its ctx (%v): %v", time.Since(start).Round(time.Millisecond), err)
	}

	drivertest.WantInvalidURL(t, "etcd://"+refusing+"?dial_timeout=1s&dial_timeout=2s", "", "dial_timeout is given 2 times")
}

// A URL's prefix must end in "/": "app" shares its range with "app-b/", so
// tenant app's client reached tenant app-b/'s lock x as its own "-b/x"
// (an adversary pass). Refused before any connection.
func TestPrefixWithoutSlash(t *testing.T) {
	drivertest.WantInvalidURL(t, "etcd://127.0.0.1:1/app", "", `prefix "app": end it with "/"`)
	drivertest.WantInvalidURL(t, "etcd://127.0.0.1:1/t/b", "", `prefix "t/b": end it with "/"`)
}

// Open of a 3-member cluster whose first listed member is stopped
// (SIGSTOP) does not wait on that member: the version check asked it
// alone, so every Open (every dlock command) took its whole ctx, 5 s
// (an adversary pass). Tried for the follower, so the cluster serves.
func TestOpenFirstMemberStopped(t *testing.T) {
	members := testserver.EtcdCluster(t, 3, 500*time.Millisecond)
	var stopped *testserver.Server
	var rest []string
	for _, m := range members {
		if stopped == nil && !testserver.EtcdIsLeader(m) {
			stopped = m
			continue
		}
		rest = append(rest, m.Addr())
	}
	stopped.Pause()
	defer stopped.Resume()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	c, err := dlock.Open(ctx, "etcd://"+stopped.Addr()+","+strings.Join(rest, ","))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Open: %v after %v", err, took.Round(time.Millisecond))
	}
	defer c.Close()
	if took > 3*time.Second { // 5 s before; room for a loaded machine
		t.Errorf("Open took %v", took.Round(time.Millisecond))
	}
}
