package tlsurl

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dlock/dlock/internal/testserver"
)

// A server that answers a ClientHello in plaintext, or closes at once, is
// reported as plaintext; a TLS server, a silent one and no server are not.
func TestPlaintextServer(t *testing.T) {
	plain := httptest.NewServer(http.NotFoundHandler()) // answers "HTTP/1.1 400"
	defer plain.Close()
	if err := PlaintextServer(t.Context(), plain.Listener.Addr().String(), "x://", nil); err == nil || !strings.Contains(err.Error(), "is it plaintext?") {
		t.Errorf("plaintext HTTP server: %v", err)
	}
	closer := testserver.Serve(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 1)) // read the hello's first byte, then hang up
	})
	if err := PlaintextServer(t.Context(), closer, "x://", nil); err == nil {
		t.Error("a server that closes at once: nil")
	}
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	if err := PlaintextServer(t.Context(), tlsSrv.Listener.Addr().String(), "x://", nil); err != nil {
		t.Errorf("TLS server: %v", err)
	}
	if err := PlaintextServer(t.Context(), "127.0.0.1:1", "x://", nil); err != nil {
		t.Errorf("no server: %v", err)
	}
	// A server that waits for more than a ClientHello is asked in plaintext.
	silent := testserver.Serve(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		n, _ := c.Read(buf)
		if strings.HasPrefix(string(buf[:n]), "PING") {
			_, _ = c.Write([]byte("+PONG\r\n"))
		}
		_, _ = c.Read(buf) // then silent until the client hangs up
	})
	if err := PlaintextServer(t.Context(), silent, "x://", nil); err != nil {
		t.Errorf("silent server without a ping: %v", err)
	}
	if err := PlaintextServer(t.Context(), silent, "x://", []byte("PING\r\n")); err == nil {
		t.Error("silent server that answers a plaintext ping: nil")
	}
	if err := PlaintextServer(t.Context(), tlsSrv.Listener.Addr().String(), "x://", []byte("PING\r\n")); err != nil {
		t.Errorf("TLS server with a ping: %v", err)
	}
}
