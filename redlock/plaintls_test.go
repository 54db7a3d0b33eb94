package redlock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// A TLS URL against a plaintext server waited out the connect timeout and
// ended in "context deadline exceeded"; the server's non-TLS answer to the
// handshake now ends Open at once, saying so.
func TestTLSAgainstPlaintextServer(t *testing.T) {
	drivertest.WantOpenFails(t, "redlock://"+testserver.Redis(t).Addr()+","+testserver.Redis(t).Addr()+","+testserver.Redis(t).Addr()+"?tls=true&insecure_skip_verify=true", "did not answer the TLS handshake: is it plaintext?")
}
