package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// A TLS URL against a plaintext server waited out the connect timeout and
// ended in "context deadline exceeded"; the server's non-TLS answer to the
// handshake now ends Open at once, saying so.
func TestTLSAgainstPlaintextServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := dlock.Open(ctx, "redlock://"+testserver.Redis(t).Addr()+","+testserver.Redis(t).Addr()+","+testserver.Redis(t).Addr()+"?tls=true&insecure_skip_verify=true")
	if err == nil {
		_ = c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "did not answer the TLS handshake: is it plaintext?") {
		t.Errorf("Open: %v; want it to say the server is plaintext", err)
	}
}
