package redislock

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/refused"
	"github.com/dlock/dlock/internal/tlsurl"
	"github.com/dlock/dlock/internal/urlparam"
	"github.com/redis/go-redis/v9"
)

// URL schemes of the backend.
const (
	Scheme            = "redis"
	SchemeTLS         = "rediss"
	SchemeSentinel    = "redis+sentinel"
	SchemeSentinelTLS = "rediss+sentinel"
	SchemeCluster     = "redis+cluster"
	SchemeClusterTLS  = "rediss+cluster"
)

const (
	// cleanupTimeout bounds the best-effort undo of a request given up on.
	cleanupTimeout = 2 * time.Second
)

func init() {
	o := driver.OpenerFunc(openURL)
	for _, s := range []string{Scheme, SchemeTLS, SchemeSentinel, SchemeSentinelTLS, SchemeCluster, SchemeClusterTLS} {
		dlock.Register(s, o)
	}
}

// Options configure Open.
type Options struct {
	// KeyPrefix starts every key dlock writes. Default "dlock".
	KeyPrefix string
	// Logger receives warnings such as an unsafe eviction policy or a client
	// that ignores context deadlines. Default slog.Default().
	Logger *slog.Logger
	// Client are options for the dlock client.
	Client []dlock.ClientOption
	// CloseClient makes Close of the dlock client close the go-redis client
	// too.
	CloseClient bool
	// Eval runs dlock's scripts with EVALSHA (EVAL on NOSCRIPT) instead of
	// as Redis Functions with FCALL; the user then needs +evalsha +eval
	// instead of +fcall. Servers older than 7.0 get EVALSHA anyway. URL:
	// scripts=eval (the default is scripts=functions).
	Eval bool

	// fromURL says that dlock made the go-redis client from a URL, so what
	// go-redis logs about it goes to Logger (redisnode.RouteLogs). A
	// caller's own client is left as it is: no hook on its commands, and its
	// lines where the application sends them.
	fromURL bool
	addrs   []string // the URL's hosts, as host:port, for RouteLogs
}

// Open returns a dlock client over an existing go-redis client (single,
// Sentinel-backed or Cluster). Closing the dlock client does not close rdb
// unless opts.CloseClient is set.
func Open(ctx context.Context, rdb redis.UniversalClient, opts Options) (*dlock.Client, error) {
	d, err := newDriver(ctx, rdb, opts, opts.CloseClient)
	if err != nil {
		return nil, err
	}
	return dlock.New(d, Scheme, opts.Client...), nil
}

func openURL(ctx context.Context, u *url.URL) (driver.Driver, error) {
	q := u.Query()
	for k, v := range q {
		// go-redis uses the last of a repeated parameter, dlock the first of
		// its own (prefix=): refuse rather than guess (addr= lists a
		// cluster's or sentinels' seeds).
		if len(v) > 1 && k != "addr" {
			return nil, fmt.Errorf("redislock: %w: %s is given %d times", dlock.ErrInvalidURL, k, len(v))
		}
	}
	opts := Options{KeyPrefix: q.Get("prefix"), Logger: driver.Logger(ctx)}
	q.Del("prefix")
	switch m := q.Get("scripts"); m {
	case "", "functions":
	case "eval":
		opts.Eval = true
	default:
		return nil, fmt.Errorf("redislock: %w: scripts=%q: want functions or eval", dlock.ErrInvalidURL, m)
	}
	q.Del("scripts")
	tc, err := tlsConfig(ctx, u.Scheme, q)
	if err != nil {
		return nil, err
	}
	tlsurl.Del(q)
	if err := urlparam.Check(q, redisInts); err != nil {
		return nil, fmt.Errorf("redislock: %w: %v", dlock.ErrInvalidURL, err)
	}
	for _, k := range []string{"dial_timeout", "pool_timeout"} {
		// go-redis takes 0 or less as "no timeout", which for these means
		// a timeout already passed: every dial, or every wait for a pooled
		// connection, then fails at once.
		if v := strings.TrimSpace(q.Get(k)); v != "" && !positiveDuration(v) {
			return nil, fmt.Errorf("redislock: %w: %s=%s: want a positive duration up to 24h (or leave it out for the default)", dlock.ErrInvalidURL, k, v)
		}
	}
	hosts := driver.Hosts(u)
	if len(hosts) == 0 || slices.Contains(hosts, "") {
		return nil, fmt.Errorf("redislock: %w: no host; want %s://host:6379[/db]", dlock.ErrInvalidURL, u.Scheme)
	}
	if tc != nil { // a TLS URL against a plaintext server: say so at once
		if err := tlsurl.PlaintextServer(ctx, hosts[0], strings.Replace(u.Scheme, SchemeTLS, Scheme, 1)+"://", []byte("PING\r\n")); err != nil {
			return nil, fmt.Errorf("redislock: connect: %w", err)
		}
	}
	// A plaintext URL against a TLS-only server, or a URL whose every
	// address refuses a connection: say so at once, where go-redis would
	// retry (for Sentinel, some 12 s, or past ctx) and report EOF, or the
	// ctx's deadline.
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	var watch *tlsurl.Watch
	if tc == nil {
		watch = tlsurl.NewWatch(strings.Replace(u.Scheme, Scheme, SchemeTLS, 1)+"://", refuse)
	}
	defaultPort := "6379"
	if strings.HasSuffix(u.Scheme, "+sentinel") {
		defaultPort = "26379"
	}
	for _, h := range hosts {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), defaultPort)
		}
		opts.addrs = append(opts.addrs, h)
	}
	refusing := refused.New(opts.addrs, refuse)
	v := *u
	v.RawQuery = q.Encode()
	base, _ := strings.CutSuffix(u.Scheme, "+sentinel")
	base, _ = strings.CutSuffix(base, "+cluster")
	v.Scheme = base
	v.Host = hosts[0]
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	var rdb redis.UniversalClient
	switch {
	case strings.HasSuffix(u.Scheme, "+cluster"):
		v.RawQuery = q.Encode()
		o, err := redis.ParseClusterURL(v.String())
		if err != nil {
			return nil, fmt.Errorf("redislock: %w: %v", dlock.ErrInvalidURL, err)
		}
		boundIO(q, &o.ContextTimeoutEnabled, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout)
		o.TLSConfig = withTLS(o.TLSConfig, tc)
		o.Dialer = openDialer(watch, refusing, o.DialTimeout, o.TLSConfig)
		o.ClusterStateReloadInterval = clusterStateReload
		rdb = redis.NewClusterClient(o)
	case strings.HasSuffix(u.Scheme, "+sentinel"):
		master := strings.Trim(u.Path, "/")
		if master == "" || strings.Contains(master, "/") {
			return nil, fmt.Errorf("redislock: %w: want %s://sentinel:26379,…/MASTERNAME", dlock.ErrInvalidURL, u.Scheme)
		}
		if q.Has("master_name") {
			return nil, fmt.Errorf("redislock: %w: master_name=: the master's name is the URL's path (%s://sentinel:26379,…/MASTERNAME)", dlock.ErrInvalidURL, u.Scheme)
		}
		db := q.Get("db")
		q.Del("db")
		q.Set("master_name", master)
		v.Path = "/" + db
		v.RawQuery = q.Encode()
		o, err := redis.ParseFailoverURL(v.String())
		if err != nil {
			return nil, fmt.Errorf("redislock: %w: %v", dlock.ErrInvalidURL, err)
		}
		if o.RouteRandomly || o.RouteByLatency { // go-redis panics on them for a failover client
			return nil, fmt.Errorf("redislock: %w: route_randomly and route_by_latency are for a cluster, not a Sentinel URL", dlock.ErrInvalidURL)
		}
		// The URL's credentials are the data nodes'; sentinels usually share them.
		o.Username, o.Password = o.SentinelUsername, o.SentinelPassword
		boundIO(q, &o.ContextTimeoutEnabled, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout)
		o.TLSConfig = withTLS(o.TLSConfig, tc)
		o.Dialer = openDialer(watch, refusing, o.DialTimeout, o.TLSConfig)
		rdb = redis.NewFailoverClient(o)
	default:
		if len(hosts) > 1 {
			return nil, fmt.Errorf("redislock: %w: several hosts need redis+cluster:// or redis+sentinel://", dlock.ErrInvalidURL)
		}
		o, err := redis.ParseURL(v.String())
		if err != nil {
			return nil, fmt.Errorf("redislock: %w: %v", dlock.ErrInvalidURL, err)
		}
		boundIO(q, &o.ContextTimeoutEnabled, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout)
		o.TLSConfig = withTLS(o.TLSConfig, tc)
		o.Dialer = openDialer(watch, refusing, o.DialTimeout, o.TLSConfig)
		rdb = redis.NewClient(o)
	}
	opts.fromURL = true
	d, err := newDriver(ctx, rdb, opts, true)
	if err != nil {
		closeBy(ctx, rdb)
		if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
			return nil, fmt.Errorf("redislock: connect: %w", cause)
		}
		if tc == nil {
			err = tlsurl.HintPlaintext(err, strings.Replace(u.Scheme, Scheme, SchemeTLS, 1)+"://")
		}
		if strings.Contains(err.Error(), "DB index is out of range") { // the URL's db, which the server does not have
			err = fmt.Errorf("redislock: %w: the URL's db: %v", dlock.ErrInvalidURL, err)
		}
		return nil, err
	}
	watch.Stop()
	refusing.Stop()
	return d, nil
}

// clusterStateReload is how old a Cluster client made from a URL lets its
// map of slots to nodes get while it sends commands. go-redis reloads the
// map when a node answers MOVED, ASK or READONLY, and otherwise after 60 s
// by default: after a master was killed, its clients kept dialling the dead
// address for a minute after its replica took over (an adversary pass),
// unable to lock, renew a hold the replica had, or hear a handoff. A reload
// is one CLUSTER SLOTS request, sent only by a client that is busy.
const clusterStateReload = time.Second

// closeBy closes rdb, waiting for it until ctx ends: a Sentinel client's
// Close waits for the dials of its sentinels under way, which go-redis
// retries for some seconds whatever their ctx, and Open returns at ctx's
// end all the same; Close then finishes behind it.
func closeBy(ctx context.Context, rdb redis.UniversalClient) {
	closed := make(chan struct{})
	go func() {
		_ = rdb.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
}

// redisInts are go-redis's integer URL parameters with the values dlock
// lets through: go-redis trusts them (pool_size=-1 panicked in make, a
// pool_size of 10⁸ exhausted memory).
var redisInts = map[string]urlparam.Int{
	"pool_size":                  urlparam.Pool,
	"min_idle_conns":             urlparam.Pool,
	"max_idle_conns":             urlparam.Pool,
	"max_active_conns":           urlparam.Pool,
	"max_concurrent_dials":       urlparam.Pool,
	"pipeline_pool_size":         urlparam.Pool,
	"pipeline_read_buffer_size":  urlparam.Between(0, 64<<20),
	"pipeline_write_buffer_size": urlparam.Between(0, 64<<20),
	"max_retries":                urlparam.Between(-1, 100),
	"max_redirects":              urlparam.Between(-1, 100),
	"dialer_retries":             urlparam.Between(0, 100),
	"protocol":                   urlparam.Between(0, 3),
	"failing_timeout_seconds":    urlparam.Between(0, 86400),
}

// positiveDuration reports whether v is a duration above zero, and at
// most a day, as go-redis reads one: whole seconds ("5") or a Go duration
// ("500ms"). go-redis multiplies seconds without a bound: 9999999999
// overflowed to a negative timeout. An unparsable v counts as positive,
// for go-redis to refuse with its own message.
func positiveDuration(v string) bool {
	if n, err := strconv.Atoi(v); err == nil {
		return n > 0 && n <= 86400
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d > 0 && d <= 24*time.Hour
	}
	return true
}

// Default I/O bounds of the clients built from URLs. Calls with a deadline
// (renewals, Redlock's per-node calls) end at it; these bound the rest.
const (
	defaultDialTimeout = 2 * time.Second
	defaultIOTimeout   = 3 * time.Second
)

// boundIO makes a go-redis client built from a URL follow context deadlines
// (go-redis ignores them unless ContextTimeoutEnabled is set, so a renewal
// sent into a silent network would wait out the read timeout, past the
// lease's expiry), and gives it dial, read and write timeouts where the
// URL's query sets none.
func boundIO(q url.Values, ctxTimeout *bool, dial, read, write *time.Duration) {
	*ctxTimeout = true
	if !q.Has("dial_timeout") {
		*dial = defaultDialTimeout
	}
	if !q.Has("read_timeout") {
		*read = defaultIOTimeout
	}
	if !q.Has("write_timeout") && !q.Has("read_timeout") { // go-redis: write follows read
		*write = defaultIOTimeout
	}
}
