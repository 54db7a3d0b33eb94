package memcachedlock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/tlsurl"
)

// urlTLS makes mc dial every server over TLS when the URL says tls=true,
// configured by its ca, cert, key and insecure_skip_verify parameters
// (which need tls=true).
//
// gomemcache resolves each server's name once, when given the list, and
// dials the address: each certificate must still be verified against the
// name in the URL, not the address it resolved to.
func urlTLS(ctx context.Context, mc *memcache.Client, hosts []string, q url.Values, on bool) error {
	if !on {
		if tlsurl.Has(q) {
			return fmt.Errorf("memcachedlock: %w: ca, cert, key and insecure_skip_verify need tls=true", dlock.ErrInvalidURL)
		}
		return nil
	}
	tc, err := tlsurl.Config(ctx, q)
	if err != nil {
		return fmt.Errorf("memcachedlock: %w: %v", dlock.ErrInvalidURL, err)
	}
	names := map[string]string{} // resolved address → the URL's host
	for _, h := range hosts {
		a, err := net.ResolveTCPAddr("tcp", h) // as gomemcache does
		if err != nil {
			return fmt.Errorf("memcachedlock: connect: %w", err)
		}
		if name, _, err := net.SplitHostPort(h); err == nil {
			names[a.String()] = name
		}
	}
	mc.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c := tc.Clone()
		c.ServerName = names[addr] // "" (an address not listed): verified against addr
		d := &tls.Dialer{Config: c}
		return d.DialContext(ctx, network, addr)
	}
	return nil
}
