package redislock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// replyDropper loses the reply to the next script call once armed: the
// call reaches the server and runs, then the connection breaks before the
// reply is read, as when a network blip or a failover cuts it. go-redis
// then sends the call again on a new connection (it retries by default).
type replyDropper struct {
	armed atomic.Bool
	drops atomic.Int32
}

func (d *replyDropper) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &dropConn{Conn: c, d: d}, nil
}

type dropConn struct {
	net.Conn
	d    *replyDropper
	drop atomic.Bool
}

func (c *dropConn) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("evalsha")) && c.d.armed.CompareAndSwap(true, false) {
		c.drop.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *dropConn) Read(b []byte) (int, error) {
	if c.drop.CompareAndSwap(true, false) {
		time.Sleep(50 * time.Millisecond) // the server runs the script
		_ = c.Conn.Close()
		c.d.drops.Add(1)
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// TestRetriedScriptsApplyOnce: go-redis sends a command again when its
// reply is lost (MaxRetries defaults to 3), so each script must do its work
// once even when it runs twice. An acquire run twice must not count two
// holds (the lock would outlive Unlock), and a release of one of two holds
// run twice must not free the lock while the other is held (a double grant).
func TestRetriedScriptsApplyOnce(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	drop := &replyDropper{}
	open := func(dial func(context.Context, string, string) (net.Conn, error)) *dlock.Client {
		t.Helper()
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: dial}) // default retries
		c, err := redislock.Open(ctx, rdb, redislock.Options{CloseClient: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c, other := open(drop.dial), open(nil)
	free := func(name string) bool {
		t.Helper()
		l, err := other.Mutex(name).TryLock(ctx)
		if errors.Is(err, dlock.ErrNotAcquired) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock(ctx)
		return true
	}

	// Load the scripts first: a reply lost to NOSCRIPT would test nothing.
	l, err := c.Mutex("retry/warm").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("acquire", func(t *testing.T) {
		m := c.Mutex("retry/acquire")
		drop.armed.Store(true)
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if drop.drops.Load() != 1 {
			t.Fatalf("%d replies dropped, want 1", drop.drops.Load())
		}
		info, err := other.Inspect(ctx, "retry/acquire")
		if err != nil {
			t.Fatal(err)
		}
		if info.Holds != 1 || info.Token != l.Token() {
			t.Errorf("store has %d holds with token %d; want 1 hold with the lease's token %d", info.Holds, info.Token, l.Token())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if !free("retry/acquire") {
			t.Error("the lock is still held after its only lease was unlocked: the retried acquire counted a second hold")
		}
	})

	t.Run("release", func(t *testing.T) {
		drop.drops.Store(0)
		m := c.Mutex("retry/release", dlock.WithOwner(dlock.NewOwnerID()))
		l1, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := m.Lock(ctx) // re-entry: two holds in the store
		if err != nil {
			t.Fatal(err)
		}
		drop.armed.Store(true)
		if err := l1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if drop.drops.Load() != 1 {
			t.Fatalf("%d replies dropped, want 1", drop.drops.Load())
		}
		if free("retry/release") {
			t.Error("another client took the lock while a lease on it was held: the retried release dropped both holds")
		}
		if err := l2.Unlock(ctx); err != nil {
			t.Error(err)
		}
		if !free("retry/release") {
			t.Error("the lock is still held after both leases were unlocked")
		}
	})
}
