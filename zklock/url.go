package zklock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/refused"
	"github.com/dlock/dlock/internal/tlsurl"
	"github.com/go-zookeeper/zk"
)

// The shortest and longest session_timeout a URL may ask for.
const (
	minSessionTimeout = 100 * time.Millisecond
	maxSessionTimeout = 24 * time.Hour
)

func openURL(ctx context.Context, u *url.URL) (driver.Driver, error) {
	opts := Options{SessionTimeout: 10 * time.Second, CloseConn: true}
	var extra []zk.ACL // the acl parameter's entries
	for k, v := range u.Query() {
		if len(v) > 1 && k != "acl" { // acl= may repeat: one entry each
			return nil, fmt.Errorf("zklock: %w: %s is given %d times", dlock.ErrInvalidURL, k, len(v))
		}
		switch k {
		case "tls", "ca", "cert", "key", "insecure_skip_verify": // urlTLS
		case "session_timeout":
			d, err := time.ParseDuration(v[0])
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("zklock: %w: session_timeout %q", dlock.ErrInvalidURL, v[0])
			}
			if d > maxSessionTimeout { // go-zookeeper sends it as int32 milliseconds
				return nil, fmt.Errorf("zklock: %w: session_timeout=%v is longer than %v (and ZooKeeper grants at most 20×tickTime, 40s with its default tickTime)",
					dlock.ErrInvalidURL, d, maxSessionTimeout)
			}
			if d < minSessionTimeout {
				// go-zookeeper times its reads by it: with 1ns it never
				// got a session, and Open said "no answer within 5s".
				return nil, fmt.Errorf("zklock: %w: session_timeout=%v is shorter than %v (and ZooKeeper grants at least 2×tickTime, 4s with its default tickTime)",
					dlock.ErrInvalidURL, d, minSessionTimeout)
			}
			opts.SessionTimeout = d
		case "acl":
			raw, err := aclValues(u.RawQuery) // not v: it has '+' as ' '
			if err != nil {
				return nil, err
			}
			acl, err := parseACL(raw)
			if err != nil {
				return nil, err
			}
			extra = acl
		default:
			return nil, fmt.Errorf("zklock: %w: unknown parameter %q", dlock.ErrInvalidURL, k)
		}
	}
	hosts := driver.Hosts(u)
	if len(hosts) == 0 {
		return nil, fmt.Errorf("zklock: %w: want zk://host:2181[,host:2181…][/chroot]", dlock.ErrInvalidURL)
	}
	chroot := strings.TrimSuffix(u.Path, "/")
	if err := checkChroot(chroot); err != nil {
		return nil, fmt.Errorf("zklock: %w: %s", dlock.ErrInvalidURL, err)
	}
	td, err := urlTLS(ctx, u.Query(), hosts)
	if err != nil {
		return nil, err
	}
	if td != nil { // a TLS URL against a plaintext server: say so at once
		if err := tlsurl.PlaintextServer(ctx, hosts[0], "tls=false", nil); err != nil {
			return nil, fmt.Errorf("zklock: connect: %w", err)
		}
	}
	// A connection refused for good (a certificate, TLS on one side only,
	// every server refusing the connection) ends the wait for a session at
	// once, with its reason.
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	opts.granted = &granted{asked: opts.SessionTimeout, hosts: len(hosts), tls: td, refused: newRefusal(ctx, hosts, refuse)}
	conn, events, err := zk.Connect(hosts, opts.SessionTimeout, zk.WithLogger(zkLogger{driver.Logger(ctx).With("backend", Scheme)}), zk.WithDialer(opts.granted.dial))
	if err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	opts.Events = events
	if u.User != nil {
		pw, _ := u.User.Password()
		if err := addAuth(ctx, conn, []byte(u.User.Username()+":"+pw)); err != nil {
			closeNow(conn)
			return nil, err
		}
		opts.ACL = zk.DigestACL(zk.PermAll, u.User.Username(), pw)
		opts.self = opts.ACL
	}
	if extra != nil {
		if opts.ACL == nil {
			opts.ACL = extra
		} else {
			opts.ACL = append(opts.ACL, extra...)
		}
	}
	d, err := newDriver(ctx, conn, chroot, opts)
	if err != nil {
		closeNow(conn)
		if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
			return nil, fmt.Errorf("zklock: connect: %w", cause)
		}
		return nil, err
	}
	opts.granted.refused.stop()
	return d, nil
}

// closeNow closes a connection that Open gives up on without waiting for
// the server's goodbye: go-zookeeper's Close stops the connection at once
// but then waits up to 1 s for the answer to its close request, which a
// server that never gave a session does not send (Open took its ctx's
// time and 1 s more).
func closeNow(conn *zk.Conn) { go conn.Close() }

// zkLogger sends go-zookeeper's log lines (connections, session events) to
// the dlock client's logger at debug level: dlock reports what matters to
// a user (lost leases) itself, at warning level.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	if z.l.Enabled(context.Background(), slog.LevelDebug) {
		z.l.Debug("zklock: go-zookeeper: " + fmt.Sprintf(format, args...))
	}
}

// tlsDialer makes the connections of a zk:// URL with tls=true: TLS to
// ZooKeeper's secure client port (secureClientPort, served by Netty).
// go-zookeeper resolves each host and dials the addresses, so each
// certificate is checked against the URL's host name, kept per address.
type tlsDialer struct {
	config *tls.Config
	names  map[string]string // resolved "ip:port" → the URL's host
}

// urlTLS reads the URL's tls, ca, cert, key and insecure_skip_verify: nil
// without tls=true (TLS parameters then are refused).
func urlTLS(ctx context.Context, q url.Values, hosts []string) (*tlsDialer, error) {
	on := false
	if q.Has("tls") {
		var err error
		if on, err = strconv.ParseBool(q.Get("tls")); err != nil {
			return nil, fmt.Errorf("zklock: %w: tls=%q: want true or false", dlock.ErrInvalidURL, q.Get("tls"))
		}
	}
	if !on {
		if tlsurl.Has(q) {
			return nil, fmt.Errorf("zklock: %w: ca, cert, key and insecure_skip_verify need tls=true", dlock.ErrInvalidURL)
		}
		return nil, nil
	}
	tc, err := tlsurl.Config(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("zklock: %w: %v", dlock.ErrInvalidURL, err)
	}
	t := &tlsDialer{config: tc, names: map[string]string{}}
	for _, h := range hosts {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			continue // go-zookeeper says what is wrong with it
		}
		addrs, _ := net.LookupHost(host) // as go-zookeeper does
		for _, a := range addrs {
			t.names[net.JoinHostPort(a, port)] = host
		}
	}
	return t, nil
}

// handshake runs the TLS handshake on c, to addr, within timeout.
func (t *tlsDialer) handshake(c net.Conn, addr string, timeout time.Duration) (net.Conn, error) {
	cfg := t.config.Clone()
	if cfg.ServerName = t.names[addr]; cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(c, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return tc, nil
}

// definitive reports a TLS handshake error that retrying cannot cure: the
// certificate is refused (by dlock or by the server), or the server does
// not speak TLS.
func definitive(err error) bool {
	var ve *tls.CertificateVerificationError
	var ae tls.AlertError
	var re tls.RecordHeaderError
	return errors.As(err, &ve) || errors.As(err, &ae) || errors.As(err, &re)
}

// refusal keeps the first definitive reason a server refused the
// connection, and tells the Open waiting for a session (go-zookeeper itself
// would retry it until the session timeout, then again). Its watch checks
// plaintext connections closed before any answer (see tlsurl.Watch), and
// its dials the refused connections (see package internal/refused): when
// every server refuses, nothing listens (a server still starting accepts
// and drops, which is retried), and Open says so at once rather than "no
// answer" at its ctx's end, as the Redis and etcd backends do.
type refusal struct {
	once   sync.Once
	err    error
	notify func(error)
	watch  *tlsurl.Watch
	dials  *refused.Dials // nil: the servers' addresses did not resolve
}

// newRefusal watches the connections to hosts (the URL's) while Open waits
// for a session.
func newRefusal(ctx context.Context, hosts []string, notify func(error)) *refusal {
	r := &refusal{notify: notify}
	r.watch = tlsurl.NewWatch("tls=true", r.set)
	if addrs := dialled(ctx, hosts); addrs != nil {
		r.dials = refused.New(addrs, r.set)
	}
	return r
}

// dialled resolves hosts into the addresses go-zookeeper dials (its
// DNSHostProvider: each host's addresses with its port, 2181 if none), or
// nil when one does not resolve (go-zookeeper's Connect then fails too).
func dialled(ctx context.Context, hosts []string) []string {
	var addrs []string
	for _, h := range zk.FormatServers(hosts) {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			return nil
		}
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			return nil
		}
		for _, ip := range ips {
			addrs = append(addrs, net.JoinHostPort(ip, port))
		}
	}
	return addrs
}

// noteDial records the result of go-zookeeper's dial of addr.
func (r *refusal) noteDial(addr string, err error) {
	if r != nil {
		r.dials.Note(addr, err)
	}
}

// stop ends the watches, once Open has a session.
func (r *refusal) stop() {
	r.watch.Stop()
	r.dials.Stop()
}

func (r *refusal) set(err error) {
	if r == nil {
		return
	}
	r.once.Do(func() {
		r.err = err
		if r.notify != nil {
			r.notify(err)
		}
	})
}

// addAuth adds digest credentials to conn, bounded by ctx and by the 10s
// Open waits for a session, and reports a refusal's reason (see refusal):
// go-zookeeper's AddAuth waits for a connection, and when a round of
// servers fails it says only "could not connect to a server". On failure
// the caller closes conn, which ends an AddAuth still waiting.
func addAuth(ctx context.Context, conn *zk.Conn, auth []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- conn.AddAuth("digest", auth) }()
	var err error
	select {
	case err = <-done:
		if err == nil {
			return nil
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("zklock: connect: %w", cause)
	}
	return fmt.Errorf("zklock: auth: %w", err)
}
