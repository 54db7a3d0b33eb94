package redlock

import (
	"context"
	"fmt"
	"net"
	"net/url"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/tlsurl"
	"github.com/redis/go-redis/v9"
)

// urlTLS sets base's TLS configuration from the URL's ca, cert, key and
// insecure_skip_verify, which need tls=true.
func urlTLS(ctx context.Context, q url.Values, base *redis.Options) error {
	if !tlsurl.Has(q) {
		return nil
	}
	if base.TLSConfig == nil {
		return fmt.Errorf("redlock: %w: ca, cert, key and insecure_skip_verify need tls=true", dlock.ErrInvalidURL)
	}
	tc, err := tlsurl.Config(ctx, q)
	if err != nil {
		return fmt.Errorf("redlock: %w: %v", dlock.ErrInvalidURL, err)
	}
	base.TLSConfig = tc
	return nil
}

// serverName is the name a node's certificate must carry: its host.
func serverName(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
