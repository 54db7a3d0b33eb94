package redislock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/refused"
	"github.com/dlock/dlock/internal/tlsurl"
	"github.com/redis/go-redis/v9"
)

// tlsConfig is the TLS configuration a URL asks for: nil for a plaintext
// scheme, which refuses TLS parameters rather than ignore them.
func tlsConfig(ctx context.Context, scheme string, q url.Values) (*tls.Config, error) {
	if !strings.HasPrefix(scheme, SchemeTLS) {
		if tlsurl.Has(q) {
			return nil, fmt.Errorf("redislock: %w: ca, cert, key and insecure_skip_verify need TLS: use %s",
				dlock.ErrInvalidURL, strings.Replace(scheme, Scheme, SchemeTLS, 1)+"://")
		}
		return nil, nil
	}
	tc, err := tlsurl.Config(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("redislock: %w: %v", dlock.ErrInvalidURL, err)
	}
	return tc, nil
}

// withTLS replaces go-redis's TLS configuration from the URL (which
// verifies every node against the first host's name) with tc, which
// verifies each connection against the host it dials; go-redis's own
// skip_verify=true still turns verification off.
func withTLS(parsed, tc *tls.Config) *tls.Config {
	if parsed == nil || tc == nil {
		return parsed
	}
	tc = tc.Clone()
	tc.InsecureSkipVerify = tc.InsecureSkipVerify || parsed.InsecureSkipVerify
	return tc
}

// openDialer is go-redis's own dialer (with the TLS configuration tc, or
// none), with the connections made while Open runs watched for a TLS-only
// server behind a plaintext URL (w, nil for a TLS URL; see tlsurl.Watch),
// and the dials for refusals (see package internal/refused). Set as Options.Dialer, it
// also dials a Sentinel URL's sentinels, which the client's hooks do not
// see.
func openDialer(w *tlsurl.Watch, r *refused.Dials, timeout time.Duration, tc *tls.Config) func(context.Context, string, string) (net.Conn, error) {
	base := redis.NewDialer(&redis.Options{DialTimeout: timeout, TLSConfig: tc})
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := base(ctx, network, addr)
		r.Note(addr, err)
		if err != nil {
			return nil, err
		}
		return w.Conn(c, addr), nil
	}
}
