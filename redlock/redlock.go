// Package redlock is the dlock backend for Redlock: a lock held on a
// majority of N independent Redis masters, as the Redlock specification
// states it, using the Redis backend's layout and scripts on each node
// (they live in an internal package both backends share).
//
// # URLs
//
//	redlock://[user:password@]h1:6379,h2:6379,h3:6379[/db][?tls=true&node_timeout=50ms&prefix=dlock&scripts=eval]
//	redlock://h1:6379,h2:6379,h3:6379?tls=true&ca=/etc/dlock/ca.pem[&cert=client.pem&key=client-key.pem]
//
// tls=true speaks TLS (1.2 or later) to every node and verifies each
// node's certificate against that node's host, with the system's CAs or
// the PEM file ca= names; cert= and key= give a client certificate, and
// insecure_skip_verify=true (and nothing else) turns verification off.
// Without tls=true these parameters are refused, not ignored. A plaintext
// URL against TLS-only nodes fails at Open, saying the servers closed the
// connection and suggesting tls=true. Errors never show a key's path.
//
// At least 3 distinct nodes; an odd number (5 is usual). Users needing other
// settings per node (each its own password, TLS or db) pass their clients to
// Open, and should set ContextTimeoutEnabled on them so the per-node
// timeout also bounds socket reads: without it, a call to a node that went
// silent holds a connection and a goroutine until the client's ReadTimeout
// (3 s by default), well past the per-node timeout, and calls pile up. Open
// logs a warning (through Options.Logger) for each client it can see
// ignores context deadlines. Clients built from a URL follow them, with a
// 2 s dial and 3 s read and write timeout.
//
// # The algorithm
//
//   - Acquire: try every node in parallel, each with a timeout much smaller
//     than the TTL (node_timeout, default min(TTL/20, 50ms); at least 1ms).
//     An attempt waits for every node's answer up to node_timeout, so with
//     node_timeout near the TTL or above it, one silent node leaves no
//     validity and nothing is granted while it stays silent. The lock is
//     held only if N/2+1 nodes granted it and time is left: validity =
//     TTL − elapsed − drift, drift = TTL/100 + 2ms. Otherwise it is released
//     on every node at once. The lease's expiry is computed from the
//     validity on the client's monotonic clock. A grant counts only the
//     nodes that agree on its token: a re-entry racing its owner's release
//     can re-enter the old hold on some nodes and make a new one on others.
//     On every node where the attempt may have left a count outside the
//     grant (another token, or no answer in time: its script may have run
//     all the same), the attempt's request is cancelled by its id, which
//     undoes exactly what it did there, if anything. A request that reaches
//     a node only after its cancel (held in a proxy, say) is not undone: its
//     count stays until the TTL, or while the owner keeps re-entering it.
//   - Renew: on every node, with the same rule; a lease that no longer holds
//     a majority is lost. Release: on every node.
//   - Waiting: waiters subscribe to the lock's release channel on every node
//     and retry on the first message, or when the holder's TTL runs out. A
//     node that does not confirm the subscription within a second is tried
//     again in the background (from 250 ms, backing off to 5 s) for as
//     long as the wait lasts; at least one node must confirm.
//     An attempt that got no majority gives back what it took, and a cancel
//     that frees the lock announces it as a release does, so contenders
//     that split the nodes, none with a majority, try again at once. An
//     attempt whose majority came too late (past the lease's validity)
//     tries again after a node timeout (at most 50 ms). When fewer than a
//     majority answer and none of those that did names another holder,
//     Lock retries with backoff and TryLock returns an error saying how
//     many answered, not ErrNotAcquired: nobody was seen to hold the lock.
//   - Re-entry by owner is counted on each node.
//   - Each node keeps the holder's label with its hold (the first acquire's,
//     as in package redislock's layout); Inspect reports the holder, label
//     included, that a majority of nodes agree on.
//
// # Fencing tokens across nodes
//
// No single node orders holders, so before granting, dlock reads the token
// counters of a majority and takes max+1, and sets it on the nodes it locks
// (the acquire script raises each node's counter to it). Any two majorities
// share a node, so a new holder's token is above every earlier holder's —
// as long as a majority keeps its data. A node restarted without fsync'd
// persistence comes back with a lower counter (or none): if that breaks the
// majority that saw the last token, tokens can go backwards (the case
// Martin Kleppmann raised); TestRestartedNodesCanRewindTokens shows it.
// Tokens stay below 2^53, as in package redislock: a counter set past it
// by hand makes every new hold fail with an error that says so. The
// same restart can grant the lock twice unless the node stays down for at
// least the longest TTL before rejoining (antirez's "delayed restart" rule),
// which dlock cannot enforce: run Redis with appendonly yes and appendfsync
// always, or delay restarts.
//
// # Mutexes only
//
// Redlock offers no read-write locks and no semaphores (Caps.Kinds is
// empty; dlock refuses an RWMutex or Semaphore with ErrUnsupported). A
// semaphore's count cannot be kept by majorities: each node counts only the
// permits it granted, and a permit held on a majority does not bound the
// holders: with 3 nodes and 2 permits, 3 holders can each hold 2 of the 3
// nodes while no node counts more than 2. A read-write lock's exclusion
// would survive (any two majorities share a node), but its writer
// preference would not: Redlock's waiters retry when a node announces a
// release, with no queue across nodes, so a stream of readers could starve
// a writer. Use package redislock (one deployment, with a queue) or a
// consensus store for them.
//
// Redlock assumes bounded clock drift and process pauses shorter than the
// validity; where that cannot be assumed, use a consensus store (etcd,
// ZooKeeper) and fencing tokens.
//
// # TTL limits
//
// TTLs are whole milliseconds, from 10 ms up to ten years; a TTL outside
// is refused with ErrInvalidTTL when the lock is made. A grant keeps TTL −
// elapsed − drift ("The algorithm"), so a TTL near a round trip to the
// nodes is granted rarely, and each too-late grant is retried with backoff.
//
// # Per-name state that stays
//
// Each node keeps each name's token counter after its last release, with
// no expiry (deleting it would let tokens go backwards): one small key per
// name ever locked, on every node. See docs/design.md ("Per-name state
// that stays") for the growth and a safe way out.
//
// # Least privilege
//
// Each node needs the ACL user of package redislock's doc (the same
// scripts run on every node), made on every node:
//
//	ACL SETUSER dlock-worker on >PASSWORD resetkeys ~dlock:* resetchannels &dlock:* -@all +ping +hello +fcall +subscribe +unsubscribe +time +get +set +del +exists +incr +pttl +pexpire +hget +hmget +hset +hdel +hexists +hincrby +hgetall +lpop +rpush +lrem +lindex +llen +publish +zadd +zcard +zrange +zrangebyscore +zrem +zscore
//
// with redlock://dlock-worker:PASSWORD@h1:6379,h2:6379,h3:6379 (one user and
// password for all nodes). When so many nodes refuse a command, key or
// channel that no majority can answer, the call fails at once with an
// error naming the missing right and wrapping dlock.ErrInvalidConfig,
// rather than reading as a lock held by another owner. Tenants are kept
// apart by prefix, and force unlock needs no more than the worker grant of
// the prefix, as in package redislock.
package redlock

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/tlsurl"
	"github.com/redis/go-redis/v9"
)

// Scheme is the URL scheme of the backend.
const Scheme = "redlock"

func init() { dlock.Register(Scheme, driver.OpenerFunc(openURL)) }

// Options configure Open.
type Options struct {
	// KeyPrefix starts every key; default "dlock".
	KeyPrefix string
	// NodeTimeout bounds each node's answer to one request; default
	// min(TTL/20, 50ms). At least a millisecond; keep it well under the
	// TTL: an attempt waits for every node up to it, so a silent node
	// leaves a TTL near it no validity to grant.
	NodeTimeout time.Duration
	// Logger receives warnings, such as a client that ignores context
	// deadlines. Default slog.Default().
	Logger *slog.Logger
	// Client are options for the dlock client.
	Client []dlock.ClientOption
	// CloseClients makes Close of the dlock client close the clients too.
	CloseClients bool
	// Eval runs dlock's scripts with EVALSHA instead of as Redis Functions,
	// as in package redislock. URL: scripts=eval.
	Eval bool

	// fromURL says that dlock made the clients from a URL, so what go-redis
	// logs about them goes to Logger (see package redislock's). A caller's
	// own clients are left as they are.
	fromURL bool
}

// Open returns a dlock client over independent Redis masters, one client
// each. It refuses fewer than 3 clients, and two that reach one server: host
// names are resolved, and two addresses with one IP address and port
// (127.0.0.1:6379 and localhost:6379; a port with leading zeros is its
// number, and an empty or unspecified host, 0.0.0.0 or ::, is this
// machine's loopback address) are one master, which would let a quorum be
// one server. It cannot see one server behind two different IP
// addresses (two interfaces, NAT); list each master once.
func Open(ctx context.Context, clients []redis.UniversalClient, opts Options) (*dlock.Client, error) {
	d, err := newDriver(ctx, clients, opts)
	if err != nil {
		return nil, err
	}
	return dlock.New(d, Scheme, opts.Client...), nil
}

func openURL(ctx context.Context, u *url.URL) (driver.Driver, error) {
	q := u.Query()
	opts := Options{KeyPrefix: q.Get("prefix"), CloseClients: true, Logger: driver.Logger(ctx), fromURL: true}
	// Per-node timeouts are contexts: have go-redis honour them on sockets.
	base := redis.Options{ContextTimeoutEnabled: true,
		DialTimeout: 2 * time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second}
	if u.User != nil {
		base.Username = u.User.Username()
		base.Password, _ = u.User.Password()
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 { // go-redis took -1 as db 0
			return nil, fmt.Errorf("redlock: %w: db %q: want a database number, 0 or more", dlock.ErrInvalidURL, db)
		}
		base.DB = n
	}
	for k, v := range q {
		if len(v) > 1 {
			return nil, fmt.Errorf("redlock: %w: %s is given %d times", dlock.ErrInvalidURL, k, len(v))
		}
		switch k {
		case "prefix":
		case "scripts":
			switch v[0] {
			case "functions":
			case "eval":
				opts.Eval = true
			default:
				return nil, fmt.Errorf("redlock: %w: scripts=%q: want functions or eval", dlock.ErrInvalidURL, v[0])
			}
		case "tls":
			on, err := strconv.ParseBool(v[0])
			if err != nil {
				return nil, fmt.Errorf("redlock: %w: tls=%q: want true or false", dlock.ErrInvalidURL, v[0])
			}
			if on {
				base.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			}
		case "ca", "cert", "key", "insecure_skip_verify": // below
		case "node_timeout":
			d, err := time.ParseDuration(v[0])
			if err != nil || d < minNodeTimeout {
				return nil, fmt.Errorf("redlock: %w: node_timeout %q: want a duration of %v or more", dlock.ErrInvalidURL, v[0], minNodeTimeout)
			}
			opts.NodeTimeout = d
		default:
			return nil, fmt.Errorf("redlock: %w: unknown parameter %q", dlock.ErrInvalidURL, k)
		}
	}
	if err := urlTLS(ctx, q, &base); err != nil {
		return nil, err
	}
	hosts := driver.Hosts(u)
	if err := checkNodes(ctx, hosts); err != nil {
		return nil, err
	}
	if base.TLSConfig != nil { // a TLS URL against a plaintext server: say so at once
		if err := tlsurl.PlaintextServer(ctx, hosts[0], "tls=false", []byte("PING\r\n")); err != nil {
			return nil, fmt.Errorf("redlock: connect: %w", err)
		}
	}
	clients := make([]redis.UniversalClient, len(hosts))
	for i, h := range hosts {
		o := base
		o.Addr = h
		if o.TLSConfig != nil {
			o.TLSConfig = o.TLSConfig.Clone()
			o.TLSConfig.ServerName = serverName(h)
		}
		clients[i] = redis.NewClient(&o)
	}
	d, err := newDriver(ctx, clients, opts)
	if err != nil {
		for _, c := range clients {
			_ = c.Close()
		}
		if base.TLSConfig == nil {
			err = tlsurl.HintPlaintext(err, "tls=true")
		}
		if strings.Contains(err.Error(), "DB index is out of range") { // the URL's db, which the servers do not have
			err = fmt.Errorf("redlock: %w: db %d: %v", dlock.ErrInvalidURL, base.DB, err)
		}
		return nil, err
	}
	return d, nil
}

// checkNodes refuses fewer than 3 nodes and duplicates: two addresses of
// one server (127.0.0.1:6379 and localhost:6379) would count as two
// independent masters, and a quorum of 2 of 3 could be that one server. So
// host names are resolved, and two addresses that share an IP address and a
// port are one master. A name that does not resolve is compared as
// written (connecting to it fails anyway).
func checkNodes(ctx context.Context, addrs []string) error {
	if len(addrs) < 3 {
		return fmt.Errorf("redlock: %w: %d nodes; Redlock needs at least 3 independent masters", dlock.ErrInvalidConfig, len(addrs))
	}
	seen := map[string]string{} // IP:port -> the address that resolved to it
	for _, a := range addrs {
		for _, k := range endpoints(ctx, a) {
			if first, dup := seen[k]; dup {
				if strings.EqualFold(first, a) {
					return fmt.Errorf("redlock: %w: node %s listed twice", dlock.ErrInvalidConfig, a)
				}
				return fmt.Errorf("redlock: %w: nodes %s and %s are one server (both reach %s); Redlock needs independent masters",
					dlock.ErrInvalidConfig, first, a, k)
			}
		}
		for _, k := range endpoints(ctx, a) {
			seen[k] = a
		}
	}
	return nil
}

// endpoints returns the IP:port pairs addr reaches: its host's addresses,
// or addr itself, lower-cased, when it does not resolve. The port is the
// number (06379 is 6379), and a host that is empty or unspecified (0.0.0.0,
// ::), which a dial takes for this machine, is the loopback address: each of
// those spellings reached one server as another node.
func endpoints(ctx context.Context, addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []string{strings.ToLower(addr)}
	}
	if n, err := strconv.ParseUint(port, 10, 16); err == nil {
		port = strconv.FormatUint(n, 10)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil || len(ips) == 0 {
		return []string{strings.ToLower(net.JoinHostPort(host, port))}
	}
	var out []string
	for _, ip := range ips {
		if p, err := netip.ParseAddr(ip); err == nil {
			p = p.Unmap().WithZone("")
			switch {
			case p.IsUnspecified() && p.Is4():
				p = netip.AddrFrom4([4]byte{127, 0, 0, 1})
			case p.IsUnspecified():
				p = netip.IPv6Loopback()
			}
			ip = p.String()
		}
		out = append(out, net.JoinHostPort(ip, port))
	}
	return out
}
