package memcachedlock_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/memcachedlock"
)

type harness struct {
	addr string
	drivertest.Clients
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	mc := memcache.New(h.addr)
	mc.DialContext = cu.Dial
	mc.Timeout = 500 * time.Millisecond
	c, err := memcachedlock.Open(ctx, mc, memcachedlock.Options{CloseClient: true})
	return h.Opened(c, cu, err, nil)
}

func (h *harness) Caps() drivertest.Caps {
	// Expiry has one-second resolution and may come a second early.
	return drivertest.Caps{TTL: 2 * time.Second, Slack: 1200 * time.Millisecond, EarlyExpiry: time.Second, StoreReentrant: true,
		NoElection: "memcached may evict or lose the leader's key, which would elect a second leader",
		NoList:     "memcached cannot enumerate its keys"}
}

func TestConformance(t *testing.T) {
	srv := testserver.Memcached(t)
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{addr: srv.Addr()}, nil
	})
}

// A restart of memcached drops every lock: the holder learns of it at its
// next renewal.
func TestRestartLosesLocks(t *testing.T) {
	srv := testserver.Memcached(t)
	c := drivertest.MustOpen(t, "memcached://"+srv.Addr())
	const ttl = 3 * time.Second
	l, err := c.Mutex("restart", dlock.WithTTL(ttl)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
			t.Fatalf("Err = %v", l.Err())
		}
	case <-time.After(ttl):
		t.Fatal("lease live after memcached restarted")
	}
}

func TestTTLLimits(t *testing.T) {
	srv := testserver.Memcached(t)
	c := drivertest.MustOpen(t, "memcached://"+srv.Addr())
	for _, ttl := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 31 * 24 * time.Hour} {
		if _, err := c.Mutex("ttl", dlock.WithTTL(ttl)).TryLock(t.Context()); !errors.Is(err, dlock.ErrInvalidTTL) {
			t.Errorf("TTL %v: %v; want ErrInvalidTTL", ttl, err)
		}
	}
	if _, err := dlock.Open(t.Context(), "memcached://"+srv.Addr()+"?bogus=1"); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("bad parameter: %v", err)
	}
}

// An item at a lock's key that is not dlock's keeps every contender out,
// and Inspect failed on it, so dlock unlock --force could not show it, and
// so not release it (finding of an adversary pass). Inspect now shows it
// held, with a note, and a force without a token releases it.
func TestForeignItemShownAndReleased(t *testing.T) {
	srv := testserver.Memcached(t)
	c := drivertest.MustOpen(t, "memcached://"+srv.Addr()+"?prefix=foreign")
	sum := sha256.Sum256([]byte("jobs/x"))
	if err := memcache.New(srv.Addr()).Set(&memcache.Item{Key: "foreign:" + hex.EncodeToString(sum[:16]), Value: []byte("garbage")}); err != nil {
		t.Fatal(err)
	}
	info, err := c.Inspect(t.Context(), "jobs/x")
	if err != nil || !info.Held || len(info.Notes) < 2 {
		t.Fatalf("Inspect of a foreign item = %+v, %v; want held, with a note", info, err)
	}
	if _, err := c.Mutex("jobs/x").TryLock(t.Context()); err == nil {
		t.Fatal("TryLock over a foreign item succeeded")
	}
	if err := c.ForceUnlock(t.Context(), "jobs/x"); err != nil {
		t.Fatal(err)
	}
	l, err := c.Mutex("jobs/x").TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock after the force: %v", err)
	}
	_ = l.Unlock(t.Context())
}
