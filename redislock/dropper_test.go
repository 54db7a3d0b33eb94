package redislock_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// scriptDropper fails the next script calls as armed, one step a call:
// "reply" lets the call reach the server and run, then breaks the
// connection before the reply is read, as when a network blip or a
// failover cuts it (go-redis then sends the call again on a new connection
// if it retries); "request" breaks the connection before the call is sent,
// so it fails and did not run.
type scriptDropper struct {
	mu    sync.Mutex
	plan  []string
	drops atomic.Int32 // replies dropped
}

// arm plans the next script calls' steps.
func (d *scriptDropper) arm(steps ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.plan = steps
}

// next takes the step for a script call ("" for none).
func (d *scriptDropper) next() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.plan) == 0 {
		return ""
	}
	step := d.plan[0]
	d.plan = d.plan[1:]
	return step
}

func (d *scriptDropper) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &dropConn{Conn: c, d: d}, nil
}

type dropConn struct {
	net.Conn
	d         *scriptDropper
	dropReply atomic.Bool
}

func (c *dropConn) Write(b []byte) (int, error) {
	if isScriptCall(b) {
		switch c.d.next() {
		case "request":
			_ = c.Conn.Close()
			return 0, net.ErrClosed
		case "reply":
			c.dropReply.Store(true)
		}
	}
	return c.Conn.Write(b)
}

func (c *dropConn) Read(b []byte) (int, error) {
	if c.dropReply.CompareAndSwap(true, false) {
		time.Sleep(50 * time.Millisecond) // the server runs the script
		_ = c.Conn.Close()
		c.d.drops.Add(1)
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// openDialer opens a client of srv whose connections come from dial (nil:
// plain ones), closed when t ends. With retry, go-redis sends a call again
// when it loses the reply (its default, MaxRetries 3); without, a call
// fails at once, bounded by its ctx.
func openDialer(t *testing.T, srv *testserver.Server, dial func(context.Context, string, string) (net.Conn, error), retry bool) *dlock.Client {
	t.Helper()
	opts := &redis.Options{Addr: srv.Addr(), Dialer: dial} // default retries
	if !retry {
		opts.MaxRetries, opts.ContextTimeoutEnabled = -1, true
	}
	c, err := redislock.Open(t.Context(), redis.NewClient(opts), redislock.Options{CloseClient: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// isScriptCall reports whether b carries a call of one of dlock's scripts:
// FCALL of a function of its library, or EVALSHA.
func isScriptCall(b []byte) bool {
	l := bytes.ToLower(b)
	return bytes.Contains(l, []byte("evalsha")) || bytes.Contains(l, []byte("fcall"))
}
