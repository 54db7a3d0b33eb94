// Package zklock is the dlock backend for ZooKeeper, through
// github.com/go-zookeeper/zk: the ephemeral-sequential lock recipe of
// ZooKeeper's documentation, with the node layout of Apache Curator's
// InterProcessMutex.
//
// # URLs
//
//	zk://[user:password@]host:2181[,host2:2181…][/chroot][?session_timeout=10s][&acl=scheme:id:perms,…]
//
// user:password adds digest authentication, and nodes dlock creates then
// carry a creator-only digest ACL; acl adds ZooKeeper ACL entries to every
// node dlock creates (perms are letters of crwda), e.g.
// acl=digest:ops:HASH:rd (see "Least privilege"). Users with a connection
// already use Open (and Options.ACL).
//
// # Layout: Curator's
//
// The lock NAME is the path <chroot>/NAME (so "orders/sku-42" is the node
// /orders/sku-42). A name must be a path ZooKeeper accepts: no empty, "."
// or ".." components and none of the characters it refuses (controls
// U+0001–U+001F and U+007F–U+009F, U+D800–U+F8FF, U+FFF0–U+FFFF, and every
// character above U+FFFF, such as emoji); Lock and TryLock refuse others
// with ErrInvalidName before sending anything. A contender creates an EPHEMERAL_SEQUENTIAL child named
// _c_<guid>-lock-<sequence>; the lowest sequence holds the lock and each
// waiter watches only the child just before its own, so a release wakes one
// waiter. That is Curator's InterProcessMutex layout (and go-zookeeper's
// zk.Lock sorts the same children the same way), so their holders and
// dlock's exclude each other. The child's data is the owner id and holder
// label (dlock.WithLabel, "host:pid" by default), joined by a NUL, which
// Inspect reports; Curator keeps the client's address there instead and
// never reads it back, so Inspect shows a Curator holder's address as its
// owner id, with no label. The create is protected: if the reply is lost,
// the client finds its child by GUID instead of creating a second one.
// Parents are created on demand as container nodes, which the server
// removes once empty.
//
// A Lock that finds the lock free costs one round trip and one write, with
// no read: the create goes in one transaction (a multi) with a write of
// empty data to the lock's node, whose reply is that node's stat just
// after the create. One child means ours is the only one, so we hold the
// lock; its pzxid is our node's czxid, the token. A client writes the
// lock's node only once a read of it has shown that it holds no data (the
// first Lock of a name in a client reads it), so dlock never overwrites
// data someone keeps there; do not start keeping data on a lock's node
// while it is in use. Where the ACL lets a client create children but not
// write the node, the client creates its nodes alone: a read of the
// children, the create and a second read then go out together, and the
// token comes from the parent's pzxid when the reads prove it is the new
// node's czxid (see createAndRead). Unlock is one delete. A waiter second
// in line takes the lock on its predecessor's deletion without reading the
// children again.
//
// # Sessions and in-doubt leases
//
// One ZooKeeper session per client. The server expires a session
// session_timeout after it last heard from the client, whatever the client
// believes, so the driver keeps its own clock: it notes the send time of
// the last request the server answered in the session (sending a cheap
// read when nothing was answered for a quarter of the timeout) and counts
// every lease on the session valid until session_timeout after that, less
// a slack of session_timeout/20 + 10ms for the two clocks and the
// scheduler. When that runs out (the connection is cut, or replies stop
// coming back), or go-zookeeper reports the session expired or replaced,
// the session's leases end at once (Done closes). None of this waits for
// go-zookeeper, which notices a silent connection only after 2/3 of the
// timeout and learns of the expiry only once it reconnects; renewals, which
// check that each holder's node still exists, return when dlock's deadline
// for them passes whether ZooKeeper answered or not. This is Chubby's
// jeopardy rule with the grace period cut to zero: a holder is told before
// the server could have expired its session. The server keeps the session
// timeout within 2 to 20 of its ticks: a client opened from a URL counts
// with the timeout the server granted when it is shorter than the one
// asked for; with Open, Options.SessionTimeout must not exceed it.
//
// Connection loss is not the end of a wait: the waiter keeps its node (and
// its place) and goes on once go-zookeeper reconnects, unless the session
// may have expired meanwhile. An attempt at a lock belongs to one session:
// if one of its requests is answered in another (go-zookeeper sends a
// queued create only after opening a new session, as for a process paused
// past its session timeout), or its session may be gone, the attempt gives
// up and a new one starts in the current session. Every attempt that gives
// up deletes its node, found by the GUID in its name if the reply was lost
// (once its create can no longer be sent), and so does the release of a
// lease declared lost. With the connection down, the deletion is retried in
// the background until ZooKeeper says the node is gone or the client
// closes: a node left behind would hold the lock for the rest of its
// session.
//
// Each renewal tick checks every held node (one exists request per lease,
// up to 64 in flight), so 10,000 held leases cost 10,000 reads per TTL/3;
// see docs/benchmarks.md.
//
// # Guarantees
//
//   - Mutual exclusion through ZooKeeper's ordered, replicated writes: a
//     majority of the ensemble must be up to grant a lock.
//   - Fencing token = the czxid of the holder's node: ensemble-wide and
//     increasing with each new holder; safe for fencing.
//   - TryLock and ctx cancellation delete the contender's node.
//   - Re-entry by owner is counted within a client, not in ZooKeeper.
//
// # Least privilege
//
// ZooKeeper has no accounts to grant: each node carries an ACL, set by the
// client that creates it. Give each service (tenant) a digest identity and
// a chroot of its own:
//
//	zk://dlock-a:PASSWORD@host:2181/app-a?acl=digest:ops:OPS_HASH:rd
//
// Every node dlock makes (the chroot and lock nodes if missing, and each
// contender's node) then carries digest:dlock-a:HASH:cdrwa, and the acl
// entries: here read and delete for an operator identity "ops", enough to
// inspect and force-unlock but not to lock (HASH is base64(SHA-1("user:
// password")), as zkCli's addauth and DigestAuthenticationProvider
// compute). Create the chroot yourself first if it must carry other
// entries; ZooKeeper's own "/" stays world-writable unless you change it.
// The test TestLeastPrivilege runs the conformance suite as such an
// identity.
//
// A refused request (zk.ErrNoAuth) gives an error naming the lock's node
// and that its ACL does not grant this identity, and wraps
// dlock.ErrInvalidConfig, so Lock fails at once.
//
// Tenants apart: another identity can neither create a contender under the
// lock's node (take or queue for it), nor delete the holder's node (release
// or force-unlock it), nor overwrite the lock's node: ZooKeeper checks
// CREATE and DELETE on the parent, which the ACL grants only to the creator
// (TestTenantsApart). Within one identity ZooKeeper cannot tell holders
// apart: any client with the identity may delete any contender's node, and
// workers that contend for one lock need CREATE and DELETE on its node
// whatever their identities, so each can delete the others' nodes. dlock
// unlock --force thus needs no more than a worker's rights on that lock.
// Across tenants, operators force-unlock through an acl entry with d (and
// r), or as ZooKeeper's superuser
// (zookeeper.DigestAuthenticationProvider.superDigest).
package zklock

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Scheme is the URL scheme of the backend.
const Scheme = "zk"

func init() { dlock.Register(Scheme, driver.OpenerFunc(openURL)) }

// Options configure Open.
type Options struct {
	// SessionTimeout is the session timeout the connection was made with;
	// leases are valid that long (less a slack) after the server last
	// answered a request of the session. Default 10s. It must not be longer
	// than the timeout the server granted (zk.Connect asks; the server
	// keeps it within 2 to 20 of its ticks): dlock counts with it. (A
	// client opened from a URL reads the granted timeout itself.)
	SessionTimeout time.Duration
	// Events is the connection's event channel, from zk.Connect. The driver
	// follows the session without it; with it, it notices changes sooner.
	// It drains the channel.
	Events <-chan zk.Event
	// ACL is set on created nodes; default zk.WorldACL(zk.PermAll).
	ACL []zk.ACL
	// Client are options for the dlock client.
	Client []dlock.ClientOption
	// CloseConn makes Close of the dlock client close conn too.
	CloseConn bool

	granted *granted // set by openURL, whose dialer learns the granted timeout
}

// Open returns a dlock client over an existing ZooKeeper connection.
func Open(ctx context.Context, conn *zk.Conn, opts Options) (*dlock.Client, error) {
	d, err := newDriver(ctx, conn, "", opts)
	if err != nil {
		return nil, err
	}
	return dlock.New(d, Scheme, opts.Client...), nil
}

func openURL(ctx context.Context, u *url.URL) (driver.Driver, error) {
	opts := Options{SessionTimeout: 10 * time.Second, CloseConn: true}
	var extra []zk.ACL // the acl parameter's entries
	for k, v := range u.Query() {
		switch k {
		case "session_timeout":
			d, err := time.ParseDuration(v[0])
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("zklock: %w: session_timeout %q", dlock.ErrInvalidURL, v[0])
			}
			opts.SessionTimeout = d
		case "acl":
			acl, err := parseACL(v)
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
	opts.granted = &granted{}
	conn, events, err := zk.Connect(hosts, opts.SessionTimeout, zk.WithLogger(zkLogger{driver.Logger(ctx).With("backend", Scheme)}), zk.WithDialer(opts.granted.dial))
	if err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	opts.Events = events
	if u.User != nil {
		pw, _ := u.User.Password()
		if err := conn.AddAuth("digest", []byte(u.User.Username()+":"+pw)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("zklock: auth: %w", err)
		}
		opts.ACL = zk.DigestACL(zk.PermAll, u.User.Username(), pw)
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
		conn.Close()
		return nil, err
	}
	return d, nil
}

// zkLogger sends go-zookeeper's log lines (connections, session events) to
// the dlock client's logger at debug level: dlock reports what matters to
// a user (lost leases) itself, at warning level.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	if z.l.Enabled(context.Background(), slog.LevelDebug) {
		z.l.Debug("zklock: go-zookeeper: " + fmt.Sprintf(format, args...))
	}
}
