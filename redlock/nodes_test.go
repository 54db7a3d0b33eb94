package redlock_test

import (
	"errors"
	"strings"
	"testing"

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
