package redlock_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/syncbuf"
	"github.com/dlock/dlock/internal/testserver"

	"github.com/dlock/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Clients built from a URL follow context deadlines, so the per-node
// timeout bounds socket reads, and have bounded I/O.
func TestURLClientsFollowContext(t *testing.T) {
	_, addrs := fiveNodes(t)
	c := open(t, addrs)
	r := []string{testserver.Redis(t).Addr(), testserver.Redis(t).Addr(), testserver.Redis(t).Addr()}
	drivertest.WantInvalidURL(t, "redlock://"+strings.Join(r, ",")+"/99999", "", "db 99999")
	var cs []redis.UniversalClient
	if !c.As(&cs) || len(cs) != len(addrs) {
		t.Fatal("As(*[]redis.UniversalClient) failed")
	}
	for i, rc := range cs {
		o := rc.(*redis.Client).Options()
		if !o.ContextTimeoutEnabled || o.DialTimeout != 2*time.Second || o.ReadTimeout != 3*time.Second || o.WriteTimeout != 3*time.Second {
			t.Errorf("node %d: ContextTimeoutEnabled %v, dial %v, read %v, write %v; want true, 2s, 3s, 3s",
				i, o.ContextTimeoutEnabled, o.DialTimeout, o.ReadTimeout, o.WriteTimeout)
		}
	}
}

// syncBuffer is a buffer a logger writes while the test reads it.
type syncBuffer = syncbuf.Buffer

// Open warns, through the logger it is given, of each client that ignores
// context deadlines, and of no other.
func TestOpenWarnsOfClientsIgnoringContext(t *testing.T) {
	_, addrs := fiveNodes(t)
	var buf syncBuffer
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: i != 3})
	}
	c, err := redlock.Open(t.Context(), clients, redlock.Options{CloseClients: true,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	log := buf.String()
	if strings.Count(log, "level=WARN") != 1 || !strings.Contains(log, "ContextTimeoutEnabled") || !strings.Contains(log, addrs[3]) {
		t.Errorf("log %q; want one warning, naming node 3 (%s) and ContextTimeoutEnabled", log, addrs[3])
	}
}

// A parameter given twice had one of its values used, silently.
func TestRepeatedParamIsRefused(t *testing.T) {
	drivertest.WantInvalidURL(t, "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?node_timeout=1s&node_timeout=5s", "", "node_timeout is given 2 times")
}

// A node_timeout no node can meet (1ns: every attempt failed with "0 of 3
// nodes answered") and a negative database (go-redis took it as db 0) are
// refused, and so is a database the servers do not have (an untyped
// connect error).
func TestNodeTimeoutBounds(t *testing.T) {
	drivertest.WantInvalidURL(t, "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?node_timeout=1ns", "", "node_timeout", "1ms")
	drivertest.WantInvalidURL(t, "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/-1", "", "db")
	r := []string{testserver.Redis(t).Addr(), testserver.Redis(t).Addr(), testserver.Redis(t).Addr()}
	drivertest.WantInvalidURL(t, "redlock://"+strings.Join(r, ",")+"/99999", "", "db 99999")
	var cs []redis.UniversalClient
	for _, a := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} {
		cs = append(cs, redis.NewClient(&redis.Options{Addr: a}))
	}
	_, err := redlock.Open(t.Context(), cs, redlock.Options{NodeTimeout: time.Nanosecond, CloseClients: true})
	if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "NodeTimeout") {
		t.Errorf("Open with NodeTimeout 1ns: %v; want ErrInvalidConfig for NodeTimeout", err)
	}
}
