package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// sessionTimeout is the tests' session timeout. The server expires a
// session it has not heard from for that long, so a client starved of CPU
// for most of it (a busy CI machine) loses its session and every lease in
// it: physics, not a renewal dlock scheduled late. 4s (the test servers
// allow up to 5s) leaves a starved process room that 2s did not.
const sessionTimeout = 4 * time.Second

type quiet struct{}

func (quiet) Printf(string, ...any) {}

type harness struct {
	addr string
	drivertest.Clients
}

func connect(addr string, dial zk.Dialer) (*zk.Conn, <-chan zk.Event, error) {
	if dial != nil {
		return zk.Connect([]string{addr}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithDialer(dial))
	}
	return zk.Connect([]string{addr}, sessionTimeout, zk.WithLogger(quiet{}))
}

// rawConn is a go-zookeeper connection straight to addr, closed when tb
// ends.
func rawConn(tb testing.TB, addr string) *zk.Conn {
	tb.Helper()
	conn, _, err := connect(addr, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(conn.Close)
	return conn
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	conn, events, err := connect(h.addr, cu.DialTimeout)
	if err != nil {
		return nil, err
	}
	c, err := zklock.Open(ctx, conn, zklock.Options{SessionTimeout: sessionTimeout, Events: events, CloseConn: true})
	return h.Opened(c, cu, err, func() { conn.Close() })
}

func (h *harness) Caps() drivertest.Caps {
	// The server expires a dead session within a tick or two of its timeout.
	return drivertest.Caps{TTL: sessionTimeout, Slack: time.Second, QueueInStore: true, SessionBound: true,
		List: drivertest.ListCaps{Labels: true, Waiters: true}}
}

// Driver gives the suite c's driver (drivertest.DriverHarness).
func (h *harness) Driver(c *dlock.Client) driver.Driver { return zklock.Driver(c) }

// openZK opens a dlock client on a connection to addrs with the session
// timeout given, closed when t ends.
func openZK(t *testing.T, addrs []string, timeout time.Duration) *dlock.Client {
	t.Helper()
	conn, events, err := zk.Connect(addrs, timeout, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := zklock.Open(t.Context(), conn, zklock.Options{SessionTimeout: timeout, Events: events, CloseConn: true})
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestConformance(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{addr: srv.Addr()}, nil
	})
}

// dlock and go-zookeeper's zk.Lock, which sorts the same lock-<seq>
// children, exclude each other on the same path.
func TestZkLockInterop(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	c := drivertest.Client(t, &harness{addr: srv.Addr()})
	ctx := t.Context()
	conn := rawConn(t, srv.Addr())
	first, err := c.Mutex("interop/x").TryLock(ctx) // creates the parents
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	zl := zk.NewLock(conn, "/interop/x", zk.WorldACL(zk.PermAll))
	locked := make(chan error, 1)
	go func() { locked <- zl.Lock() }()
	select {
	case err := <-locked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("zk.Lock did not get a free lock")
	}
	if _, err := c.Mutex("interop/x").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while zk.Lock holds: %v", err)
	}
	if err := zl.Unlock(); err != nil {
		t.Fatal(err)
	}
	l, err := c.Mutex("interop/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		zl2 := zk.NewLock(conn, "/interop/x", zk.WorldACL(zk.PermAll))
		if err := zl2.Lock(); err == nil {
			close(got)
			_ = zl2.Unlock()
		}
	}()
	select {
	case <-got:
		t.Fatal("zk.Lock got the lock while dlock held it")
	case <-time.After(500 * time.Millisecond):
	}
	_ = l.Unlock(ctx)
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("zk.Lock did not get the lock after dlock released it")
	}
}

// Names that are not ZooKeeper paths are refused with ErrInvalidName,
// naming the name, before anything is sent: the characters are those
// ZooKeeper's PathUtils.validatePath refuses, and the test shows the server
// refuses each of them ("invalid arguments") and accepts the good names.
func TestBadNames(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	c := drivertest.Client(t, &harness{addr: srv.Addr()})
	direct := rawConn(t, srv.Addr())
	if _, err := direct.Create("/bad", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	// serverRefuses reports whether the server refuses to create /name. A
	// multi, because go-zookeeper checks paths (not all) before a create.
	serverRefuses := func(name string) bool {
		t.Helper()
		_, err := direct.Multi(&zk.CreateRequest{Path: "/" + name, Acl: zk.WorldACL(zk.PermAll)})
		if err != nil && !errors.Is(err, zk.ErrBadArguments) {
			t.Fatalf("create /%q: %v", name, err)
		}
		return errors.Is(err, zk.ErrBadArguments)
	}
	chars := []string{"\x01", "\x1f", "\x7f", "\u0085", "\u009f", "\ue000", "\uf8ff", "\ufff0", "\ufffd", "\uffff", "\U0001F600"}
	for _, ch := range chars {
		name := "bad/a" + ch + "b"
		if !serverRefuses(name) {
			t.Errorf("the server accepts %q: the test's list is wrong", name)
		}
		if _, err := c.Mutex(name).TryLock(t.Context()); !errors.Is(err, dlock.ErrInvalidName) || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("TryLock(%q) = %v; want ErrInvalidName naming it", name, err)
		}
	}
	for _, name := range []string{"a//b", "a/./b", "../x", "a/..", "x/", "zookeeper"} {
		if _, err := c.Mutex(name).TryLock(t.Context()); !errors.Is(err, dlock.ErrInvalidName) {
			t.Errorf("TryLock(%q) = %v; want ErrInvalidName", name, err)
		}
	}
	for _, name := range []string{"good/a\u00a0b", "good/a.b", "good/...", "good/日本", "good/a\uffefb", "good/a b"} {
		l, err := c.Mutex(name).TryLock(t.Context())
		if err != nil {
			t.Errorf("TryLock(%q): %v", name, err)
			continue
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Error(err)
		}
	}
}

// go-zookeeper's log lines go to the dlock client's logger (at debug
// level), not to stderr.
func TestClientLogsGoToSlog(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	rec := &recordingHandler{}
	c, err := dlock.Open(t.Context(), "zk://"+srv.Addr(), dlock.WithLogger(slog.New(rec)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for end := time.Now().Add(5 * time.Second); !rec.saw("go-zookeeper: "); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no go-zookeeper log line reached the client's logger")
		}
	}
}

type recordingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }
func (h *recordingHandler) saw(s string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
