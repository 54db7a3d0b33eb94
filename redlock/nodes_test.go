package redlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// TestOneServerTwice: two addresses of one server (127.0.0.1:P and
// localhost:P) are one master, not two: Open refuses them, naming both,
// where a quorum of 2 of 3 would otherwise be that one server.
func TestOneServerTwice(t *testing.T) {
	a, b := testserver.Redis(t), testserver.Redis(t)
	port := a.Addr()[strings.LastIndex(a.Addr(), ":")+1:]
	for _, tc := range []struct{ name, url, want string }{
		{"same text", "redlock://" + a.Addr() + "," + a.Addr() + "," + b.Addr(), "listed twice"},
		{"name and address", "redlock://" + a.Addr() + ",localhost:" + port + "," + b.Addr(), "are one server"},
		// Spellings that reached the server as another node (an adversary
		// pass: a quorum of one server, granted with b stopped).
		{"leading zero", "redlock://" + a.Addr() + ",127.0.0.1:0" + port + "," + b.Addr(), "are one server"},
		{"name, leading zeros", "redlock://" + a.Addr() + ",localhost:00" + port + "," + b.Addr(), "are one server"},
		{"unspecified", "redlock://" + a.Addr() + ",0.0.0.0:" + port + "," + b.Addr(), "are one server"},
		{"no host", "redlock://:" + port + "," + a.Addr() + "," + b.Addr(), "are one server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dlock.Open(t.Context(), tc.url)
			if err == nil {
				c.Close()
				t.Fatalf("Open(%s) took one server twice", tc.url)
			}
			if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v; want ErrInvalidConfig saying %q", err, tc.want)
			}
		})
	}
}

// Open with one of three nodes stopped (SIGSTOP) or killed returns once
// the other two answered: it waited out 2 s per step, and go-redis's
// redials of a refusing node for longer, so every dlock command took
// 3.7–5 s with one node down (an adversary pass). A lock then works.
func TestOpenNeedsAQuorumOnly(t *testing.T) {
	for _, down := range []string{"stopped", "killed"} {
		a, b, c := testserver.Redis(t), testserver.Redis(t), testserver.Redis(t)
		if down == "stopped" {
			c.Pause()
			defer c.Resume()
		} else {
			c.Kill()
		}
		start := time.Now()
		cl, err := dlock.Open(t.Context(), "redlock://"+a.Addr()+","+b.Addr()+","+c.Addr())
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%s: %v", down, err)
		}
		// 2 s is one step's bound: under it, with room for a loaded machine.
		if took > 1500*time.Millisecond {
			t.Errorf("Open with a node %s took %v", down, took.Round(time.Millisecond))
		}
		l, err := cl.Mutex("quorum").Lock(t.Context())
		if err != nil {
			t.Fatalf("%s: Lock: %v", down, err)
		}
		_ = l.Unlock(t.Context())
		_ = cl.Close()
	}
}
