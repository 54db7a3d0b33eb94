package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// silencer makes a node's scripts run but their replies never arrive in
// time, while armed: the node granted, and the client cannot know. With
// unsent, the scripts never reach the node instead.
type silencer struct {
	armed  atomic.Bool
	unsent bool
}

func (s *silencer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &silentConn{Conn: c, s: s}, nil
}

type silentConn struct {
	net.Conn
	s      *silencer
	script atomic.Bool
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "silenced reply: i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func (c *silentConn) Write(b []byte) (int, error) {
	if c.s.armed.Load() && isScriptCall(b) {
		if c.s.unsent {
			_ = c.Conn.Close()
			return 0, net.ErrClosed
		}
		c.script.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *silentConn) Read(b []byte) (int, error) {
	if c.script.Load() {
		time.Sleep(20 * time.Millisecond) // the server runs the script
		_ = c.Conn.Close()
		return 0, timeoutErr{}
	}
	return c.Conn.Read(b)
}

// An attempt that misses its majority undoes its holds on every node,
// including those whose grant came too late to be counted: otherwise they
// stay counted for the owner, and its next attempt re-enters them, so the
// nodes count more holds than the client has.
// silenced opens a Redlock client of addrs whose nodes from the third on (a
// majority of five) talk through sil, with go-redis's maxRetries, and a
// plain client of every node to read what it holds.
func silenced(t *testing.T, addrs []string, sil *silencer, maxRetries int) (*dlock.Client, []*redis.Client) {
	t.Helper()
	clients := make([]redis.UniversalClient, len(addrs))
	raw := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		o := &redis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: maxRetries}
		if i >= 2 {
			o.Dialer = sil.dial
		}
		clients[i] = redis.NewClient(o)
		raw[i] = redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { _ = raw[i].Close() })
	}
	c, err := redlock.Open(t.Context(), clients, redlock.Options{CloseClients: true, NodeTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, raw
}

func TestFailedAttemptUndoesLateGrants(t *testing.T) {
	_, addrs := fiveNodes(t)
	ctx := t.Context()
	sil := &silencer{}
	c, raw := silenced(t, addrs, sil, 0)
	m := c.Mutex("late", dlock.WithTTL(10*time.Second), dlock.WithOwner(dlock.NewOwnerID()))
	if l, err := m.TryLock(ctx); err != nil { // load the scripts on every node
		t.Fatal(err)
	} else if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	sil.armed.Store(true)
	if _, err := m.TryLock(ctx); err == nil {
		t.Fatal("TryLock won a majority while a majority was silent")
	}
	sil.armed.Store(false)
	left := func() []int64 { return holdsOf(t, raw, "late", m.Owner()) }
	var holds []int64
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if holds = left(); holds[2]+holds[3]+holds[4] == 0 {
			break
		}
	}
	if holds[0]+holds[1]+holds[2]+holds[3]+holds[4] != 0 {
		t.Errorf("after a failed attempt the nodes count holds %v for its owner; want none", holds)
	}

	l, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range left() {
		if n != 1 {
			t.Errorf("after the next attempt the nodes count holds %v; want 1 on each", left())
			break
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// holdsOf returns owner's hold count for name on each node.
func holdsOf(t *testing.T, raw []*redis.Client, name, owner string) []int64 {
	t.Helper()
	var n []int64
	for _, r := range raw {
		v, err := r.HGet(t.Context(), "dlock:{"+name+"}", owner).Int64()
		if errors.Is(err, redis.Nil) {
			v, err = 0, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		n = append(n, v)
	}
	return n
}

// TestFailedReleaseIsNotReentered: an Unlock whose release never reached a
// majority leaves holds there that the client forgets. The owner's next
// Lock must not re-enter them (the nodes would count a hold more than the
// client, with the old token): the failed releases are completed first.
func TestFailedReleaseIsNotReentered(t *testing.T) {
	_, addrs := fiveNodes(t)
	ctx := t.Context()
	sil := &silencer{unsent: true}
	c, raw := silenced(t, addrs, sil, -1)
	const name = "failed-release"
	m := c.Mutex(name, dlock.WithTTL(10*time.Second), dlock.WithOwner(dlock.NewOwnerID()))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sil.armed.Store(true)
	if err := l.Unlock(ctx); err == nil {
		t.Fatal("Unlock succeeded though a majority of its releases were dropped")
	}
	sil.armed.Store(false)
	if h := holdsOf(t, raw, name, m.Owner()); h[2]+h[3]+h[4] != 3 {
		t.Fatalf("holds %v after the dropped releases; want the silent nodes' still there", h)
	}
	l2, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h := holdsOf(t, raw, name, m.Owner()); h[0] != 1 || h[1] != 1 || h[2] != 1 || h[3] != 1 || h[4] != 1 || l2.Token() <= l.Token() {
		t.Errorf("the next Lock got token %d (the failed one's %d), nodes count holds %v: want a new token, 1 hold on each",
			l2.Token(), l.Token(), h)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if h := holdsOf(t, raw, name, m.Owner()); h[0]+h[1]+h[2]+h[3]+h[4] != 0 {
		t.Errorf("holds %v after the last Unlock; want none", h)
	}
}

// isScriptCall reports whether b carries a call of one of dlock's scripts:
// FCALL of a function of its library, or EVALSHA.
func isScriptCall(b []byte) bool {
	l := bytes.ToLower(b)
	return bytes.Contains(l, []byte("evalsha")) || bytes.Contains(l, []byte("fcall"))
}
