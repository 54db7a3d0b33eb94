// Package memcachedlock is the dlock backend for Memcached, through
// github.com/bradfitz/gomemcache: the classic `add` lock, which succeeds
// only if the key is absent.
//
// # URLs
//
//	memcached://host:11211[,host2:11211…][?timeout=500ms&prefix=dlock]
//	memcached://host:11211?tls=true[&ca=/etc/dlock/ca.pem&cert=client.pem&key=client-key.pem]
//
// With several servers a lock lives on the one server its key hashes to:
// that server alone decides it, and if it is lost the locks on it are lost.
//
// # TLS
//
// tls=true speaks TLS (1.2 or later) to servers run with -Z (memcached
// 1.6 built with TLS, as Debian's is), verifying each certificate against
// the server's host with the system's CAs or the PEM file ca= names;
// cert= and key= give a client certificate (for ssl_verify_mode). Only
// insecure_skip_verify=true turns verification off. TLS parameters without
// tls=true are refused, not ignored. The handshake must fit in timeout
// (500ms by default). A plaintext URL against a TLS-only server fails at
// Open: the server closes the connection, and the error suggests tls=true.
// Errors never show a key's path.
//
// # Layout
//
// A lock is the item "<prefix>:<sha256 of the name>" holding, as JSON, its
// owner id, holder label (the first hold's: a re-entry keeps it), hold
// count and fencing token, with the TTL as its expiration; acquire is `add`,
// and re-entry, renewal and release are `gets` + `cas` checked against the
// owner and token (release is a `cas` to an expiration in the
// past, so it never deletes another owner's lock). The fencing token is an
// `incr` of the counter item "<key>:token".
//
// # Guarantees and non-guarantees
//
//   - Expiry has a 1 s resolution and memcached may expire an item up to 1 s
//     before its TTL (its clock ticks once a second), so a TTL must be whole
//     seconds, at least 2 s, and at most 30 days (memcached reads longer ones
//     as absolute times); dlock counts a lease valid for TTL−1s.
//   - Memcached has no notifications: waiters poll with capped exponential
//     backoff and jitter.
//   - gomemcache's calls take no ctx: each waits for its answer up to
//     timeout (500ms by default). So a Lock whose ctx ends while memcached
//     is silent returns up to about two timeouts late (its request under
//     way, then the check that it took nothing), not the 2 s of other
//     backends, and an Unlock or Extend up to a timeout late; a larger
//     timeout= stretches these too.
//   - Eviction and restarts silently drop locks and reset token counters.
//     Run memcached with -M (no eviction: writes fail instead when memory is
//     full), and know that a restart frees every lock at once (holders learn
//     of it at their next renewal). Fencing tokens here are NOT safe for
//     fencing: after a restart or an eviction of the counter they start over.
//   - No read-write locks or semaphores: Client.RWMutex and Client.Semaphore
//     report ErrUnsupported (see kindsNote for why).
//
// # Per-name state that stays
//
// Each name's "<key>:token" counter item stays after its last release
// until memcached evicts it (which resets the token: see above); it takes
// memory only while memcached has room for it.
//
// # Least privilege
//
// Memcached has no rights to grant. Debian's build can authenticate
// clients, with SASL (-S, binary protocol only, which gomemcache does not
// speak) or an ASCII auth file (-Y, experimental, not supported by dlock),
// but an authenticated client may then do anything: read, overwrite or
// delete any item (a lock or its token counter) and flush_all. There are no
// per-key or per-command rights, so neither a minimal grant nor tenants on
// one server can be had: any client that reaches the server can release or
// take over any lock on it, and force unlock needs no special right. Keep
// memcached on a private network (bind it to loopback or an internal
// address), and give each tenant a memcached of its own; prefix=NAME keeps
// names apart, not tenants.
package memcachedlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/tlsurl"
)

// Scheme is the URL scheme of the backend.
const Scheme = "memcached"

func init() { dlock.Register(Scheme, driver.OpenerFunc(openURL)) }

// Options configure Open.
type Options struct {
	// KeyPrefix starts every key; default "dlock".
	KeyPrefix string
	// Client are options for the dlock client.
	Client []dlock.ClientOption
	// CloseClient makes Close of the dlock client close mc too.
	CloseClient bool
}

// Open returns a dlock client over an existing memcache client.
func Open(ctx context.Context, mc *memcache.Client, opts Options) (*dlock.Client, error) {
	d, err := newDriver(mc, opts)
	if err != nil {
		return nil, err
	}
	return dlock.New(d, Scheme, opts.Client...), nil
}

func openURL(ctx context.Context, u *url.URL) (driver.Driver, error) {
	q := u.Query()
	opts := Options{KeyPrefix: q.Get("prefix"), CloseClient: true}
	if err := checkPrefix(opts.KeyPrefix); err != nil {
		return nil, fmt.Errorf("memcachedlock: %w: prefix %v", dlock.ErrInvalidURL, err)
	}
	timeout := 500 * time.Millisecond
	useTLS := false
	for k, v := range q {
		if len(v) > 1 { // the first would be used, silently
			return nil, fmt.Errorf("memcachedlock: %w: %s is given %d times", dlock.ErrInvalidURL, k, len(v))
		}
		switch k {
		case "prefix", "ca", "cert", "key", "insecure_skip_verify":
		case "tls":
			on, err := strconv.ParseBool(v[0])
			if err != nil {
				return nil, fmt.Errorf("memcachedlock: %w: tls=%q: want true or false", dlock.ErrInvalidURL, v[0])
			}
			useTLS = on
		case "timeout":
			d, err := time.ParseDuration(v[0])
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("memcachedlock: %w: timeout %q", dlock.ErrInvalidURL, v[0])
			}
			timeout = d
		default:
			return nil, fmt.Errorf("memcachedlock: %w: unknown parameter %q", dlock.ErrInvalidURL, k)
		}
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("memcachedlock: %w: want memcached://host:11211[,host:11211…]", dlock.ErrInvalidURL)
	}
	hosts := driver.Hosts(u)
	if len(hosts) == 0 {
		return nil, fmt.Errorf("memcachedlock: %w: no server", dlock.ErrInvalidURL)
	}
	mc := memcache.New(hosts...)
	mc.Timeout = timeout
	if err := urlTLS(ctx, mc, hosts, q, useTLS); err != nil {
		return nil, err
	}
	if err := awaitAnswer(ctx, mc); err != nil {
		if !useTLS {
			err = tlsurl.HintPlaintext(err, "tls=true")
		}
		return nil, fmt.Errorf("memcachedlock: connect: %w", err)
	}
	d, err := newDriver(mc, opts)
	if err != nil {
		if !useTLS {
			err = tlsurl.HintPlaintext(err, "tls=true")
		}
		return nil, err
	}
	return d, nil
}

// awaitAnswer pings mc until a server answers or ctx ends: timeout= bounds
// each try (memcache applies it to every request, connecting included),
// and ctx's deadline bounds the wait for the first answer, as every backend
// waits for its store at Open (dlock's --connect-timeout). Without a
// deadline it tries once. An error other than a timeout (a refused
// connection) is returned at once.
func awaitAnswer(ctx context.Context, mc *memcache.Client) error {
	_, bounded := ctx.Deadline()
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		err := mc.Ping()
		var ne net.Error
		var cte *memcache.ConnectTimeoutError
		if err == nil || !bounded || !(errors.As(err, &ne) && ne.Timeout() || errors.As(err, &cte)) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last try: %w)", ctx.Err(), err)
		case <-time.After(min(pause, time.Until(deadlineOf(ctx)))):
		}
	}
}

// deadlineOf is ctx's deadline (awaitAnswer calls it only when there is one).
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
