package tlsurl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// probeTimeout bounds PlaintextServer's handshake: a TLS server answers a
// ClientHello in one round trip.
const probeTimeout = 3 * time.Second

// PlaintextServer tells a TLS client's Open, at once, that the server at
// addr does not speak TLS, where the client would retry until its connect
// timeout and report "context deadline exceeded". It makes a connection of
// its own and sends a ClientHello (unverified: it only asks whether the
// server speaks TLS). A server that answers with something other than TLS,
// or closes the connection before answering, is plaintext. A server that
// stays silent (Redis waits for the rest of what it takes for a command)
// is asked again on a second connection with ping, a plaintext request of
// its protocol, if not nil: any answer that is not a TLS record means
// plaintext. It returns an error only for a plaintext server; anything
// else (no server, a TLS server, a silent one) is left to the client to
// find and report. hint is the plaintext URL form to suggest, e.g.
// "redis://" or "tls=false".
func PlaintextServer(ctx context.Context, addr, hint string, ping []byte) error {
	plain := fmt.Errorf("the server at %s did not answer the TLS handshake: is it plaintext? (then use %s)", addr, hint)
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var nd net.Dialer
	raw, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer raw.Close()
	hctx, hcancel := context.WithTimeout(ctx, probeTimeout/3)
	defer hcancel()
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // a probe: nothing is sent over it
	err = c.HandshakeContext(hctx)
	var rh tls.RecordHeaderError
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &rh) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return plain
	case ping == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()):
		return nil
	}
	// Silent: ask in plaintext.
	raw2, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer raw2.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = raw2.SetDeadline(dl)
	}
	if _, err := raw2.Write(ping); err != nil {
		return nil
	}
	var b [1]byte
	if n, _ := raw2.Read(b[:]); n == 1 && b[0] != 0x15 && b[0] != 0x16 { // not a TLS alert or handshake record
		return plain
	}
	return nil
}
