// Package etcdlock is the dlock backend for etcd (v3 API), through
// go.etcd.io/etcd/client/v3.
//
// # URLs
//
//	etcd://[user:password@]host:2379[,host2:2379…][/prefix][?dial_timeout=5s]
//	etcds://…?ca=ca.pem&cert=client.pem&key=client-key.pem   TLS (files)
//
// Users with a client already use Open.
//
// # TLS
//
// etcds:// speaks TLS (1.2 or later) to every endpoint and verifies each
// server certificate against the endpoint's host, with the system's CAs or
// the PEM file ca= names. cert= and key= give a client certificate, for
// servers run with --client-cert-auth. insecure_skip_verify=true (and
// nothing else) turns verification off. etcd:// refuses these parameters
// rather than ignore them. A connection the server or dlock refuses at the
// TLS level (an untrusted certificate or one for another name, a missing
// client certificate, a plaintext URL against a TLS-only port) fails Open
// at once with gRPC's reason and a hint, instead of waiting out the
// connect timeout, and so does a URL whose every endpoint refuses the
// connection (nothing listens there). Errors never show a key's path.
//
// # Bounded I/O
//
// A client built from a URL dials with a timeout (dial_timeout, 5s), which
// also bounds Open's wait for an answer (10s for a client passed to Open),
// and pings
// its connections every 10s (gRPC's minimum), dropping one that does not answer
// within 3s, so a dead or cut-off member is left for the others. Every call
// the driver makes follows its ctx. The requests it repeats until they succeed
// or ctx ends (the waiter's put and reads, the release, the lease refresh
// before a grant) bound each attempt by 1s: etcd answers a write lost with a
// killed leader only after its request timeout (5s and two election
// timeouts), which would stall the lock that long. A TryLock retries its
// put and refresh for at most 7s (etcd's own request timeout), so a slow
// etcd is not taken for a refusal; but an etcd whose round trip is over
// the 1s of an attempt grants nothing, to a TryLock or a Lock, since every
// attempt ends before its reply. A Lock or TryLock whose ctx ends lets its
// put's attempt finish (up to 1s: a put cut short could land after the
// delete that undoes it) and then deletes its key (up to 1s more), so it
// returns up to about 2s after its ctx, with a grant if the put was one.
// A release retries for at
// most the lock's TTL; if it cannot finish, the key is deleted in the
// background (or goes with the session) and the error says so.
//
// Users who pass their own client to Open should set DialTimeout,
// DialKeepAliveTime (10s or more) and DialKeepAliveTimeout in its
// clientv3.Config for the same behaviour.
//
// # Layout: the same as etcd's own lock
//
// A contender puts the key "<prefix><name>/<lease id in hex>" under its
// session's lease, with its owner id and holder label (dlock.WithLabel,
// "host:pid" by default) as the value, joined by a NUL; the key with the lowest
// create revision holds the lock, and each waiter watches only the contender
// key just before its own. That is the layout of etcd's client/v3/concurrency
// Mutex and of `etcdctl lock`, so their holders and dlock's exclude each other (with the
// default empty prefix, `etcdctl lock NAME` is dlock's lock NAME). They put
// an empty value and never read it: Inspect reports their holders with no
// owner id or label.
//
// Names may nest: the keys of the lock "a/b" ("a/b/<lease>") lie under the
// prefix of the lock "a" ("a/"). dlock counts as the contenders of "a" only
// the direct children "a/<lease>", so among dlock clients "a" and "a/b" are
// two locks: a holder of "a/b" neither blocks "a" nor shows in its Inspect,
// List, Leader or ForceUnlock. etcd's Mutex and `etcdctl lock` do not
// filter: `etcdctl lock a` queues behind every key under "a/", dlock's
// holders of "a/b" included (it waits longer, never less), and `etcdctl
// lock a/b` is seen by dlock as the lock "a/b". A contender's last part is
// its lease id in hex, in every etcd lock layout, so another program's key
// under the prefix ("a/config", put without a lease, which nothing would
// ever delete) holds nothing for dlock either. The reads of a queue go a
// page (64 keys) at a time, so a lock with many locks named under it costs
// a read per page of their keys.
//
// # Read-write locks and semaphores
//
// Each hold or waiter of a read-write lock or semaphore has a key of its
// own under the session's lease, with the owner id and label as value, and
// the queue is ordered by create revision as the mutex's is. The keys start
// with a family marker and end the name with a NUL (which names cannot
// hold), so they never fall under a mutex's prefix nor under another name:
//
//	<prefix>\x00rw\x00NAME\x00r/<lease>_<n>    a reader
//	<prefix>\x00rw\x00NAME\x00w/<lease>_<n>    a writer
//	<prefix>\x00sem\x00NAME\x00<lease>_<n>     a permit
//	<prefix>\x00sem\x00NAME                    the permit count, in decimal
//
// n (in hex) is a number none of the session's other keys there uses: a
// name is used again once its key is known gone, so a client leaves as many
// deleted keys in etcd's index as it ever had contenders at once (see
// Compaction). A name whose put had no certain answer is not used again.
//
// A reader holds when no writer's key comes before its own (a queued writer
// keeps later readers out) and watches only the last writer's key before it;
// a writer holds when no key comes before its own and watches only the key
// just before it. A permit holds when fewer than the limit of keys come
// before its own. Any of those may go first, so a permit waiter watches the
// deletions under the semaphore's prefix and reads again only once enough of
// the keys it counted before it are gone. The put of a permit's key is
// guarded in its transaction by the stored count: it goes in while the count
// is the caller's, or, storing the caller's, while the semaphore has no keys
// (or no count); otherwise the acquire fails with ErrLimitMismatch. The
// count key has no lease: it stays once the semaphore is idle.
//
// Tokens are the keys' create revisions, as for the mutex: a write hold's
// token is greater than that of every earlier hold, reads included; each
// permit has its own. Readers or permits granted together may return in
// another order than their tokens'. The grant is proven by the read after
// the wait, and the hold ends with the session lease, as for the mutex.
//
// # Sessions
//
// A client keeps one lease per distinct lock TTL (its session), refreshed
// every TTL/3 by one goroutine per session (not per lock); every lock of that
// TTL is a key under it. When a session's lease expires or is revoked, Done closes on every
// lease of it. Because a key is per lease, one client has at most one key per
// name: its other contenders for that name queue inside the client, behind
// it, so a release wakes one waiter per client.
//
// # Elections
//
// Client.Election uses the layout of etcd's client/v3/concurrency Election,
// which is that of its lock: the candidate's key "<prefix><name>/<lease id>"
// holds its value alone, the lowest create revision leads and is the term,
// and Proclaim rewrites the value while the leader key's create revision is
// the term's. So `etcdctl elect NAME PROPOSAL`, `etcdctl elect -l NAME` and
// dlock see one leader (tested both ways). A lock and an election of one
// name are one queue, as in etcd's own recipes.
//
// # Guarantees and non-guarantees
//
//   - Mutual exclusion holds through etcd's Raft consensus: a lock granted by a
//     majority survives the loss of a minority of members; without a majority
//     no lock is granted (Lock waits until its ctx ends).
//   - Fencing token = the create revision of the holder's key: global across
//     the cluster and strictly increasing with each new holder, and it
//     survives restarts (etcd persists it with fsync). It is safe for fencing.
//     Guard a write to etcd itself with Lease.As(*etcdlock.Lease) and
//     Lease.IsOwner in a transaction.
//   - A lease is declared lost before etcd can expire it: its validity is
//     counted from the sending of the last refresh etcd answered.
//   - A grant is proven after the wait: Lock returns only once a read sent
//     after the wait finds the contender's key still there, under its live
//     session lease, and first in line, and the grant counts from that read.
//     A waiter whose key went with its session (its process paused past the
//     TTL) queues again with a new key in a new session, behind whoever
//     queued meanwhile, and gets a higher token.
//   - A request whose attempt timed out may still reach etcd later (held in
//     a proxy, or in a dropped connection's buffers). Every delete the
//     driver sends names the create revision of the key it means, so a late
//     one takes no later holder's key. A mutex waiter's put that lands
//     after the waiter was done with the name (granted and unlocked, or
//     given up) creates a key under the client's session that no contender
//     owns: after such an uncertain put, the client watches that key for a
//     minute and deletes it, under its create revision, whenever it appears
//     while none of the client's contenders uses it. A read-write lock's
//     or semaphore's key name whose put had no certain answer is never used
//     again by the session, so once its contender is done with it, the
//     client watches it the same way for a minute and deletes any key of
//     it under the session.
//     A late put onto a key that is there overwrites its value: an
//     election's leader can read an earlier Campaign or Proclaim value
//     again (until its next Proclaim), and Inspect an earlier contender's
//     owner and label. Exclusion holds in every case; only liveness and
//     those values are at stake, and only under requests delayed past the
//     1s attempt timeout.
//   - After the leader of a cluster is killed, locking resumes about an
//     election timeout plus an attempt timeout (1s) later.
//   - Re-entry by owner is counted within a client, not in etcd: processes
//     sharing an owner id do not re-enter each other's holds.
//   - TTLs are whole seconds, at least 2 s (etcd raises shorter leases to its
//     minimum).
//
// # Per-name state that stays
//
// No token counter: tokens are the cluster's revisions, and a mutex's keys
// go with its holds. A semaphore's permit-count key stays once the
// semaphore is idle (see above): one small key per semaphore name used.
//
// # Compaction
//
// etcd keeps every revision until it is compacted, and a deleted key stays
// in its index until then: every read of a range visits the deleted keys in
// it. A Mutex's key is named after the client's session lease, so a name
// has one such key per client, and a read-write lock's and a semaphore's
// keys reuse their names (above), as many per client as it had contenders
// at once. (With a name new for each acquisition, as before 2026-11-27,
// each read of their queue visited every key acquired and released since
// the last compaction: on the embedded etcd, a semaphore's uncontended
// Acquire+Unlock took 1.5 ms each over 1,000 and 3.5 ms each over 20,000;
// with the names reused, 1.5 and 1.3 ms.)
// Other clients that put new keys under the prefix (etcdctl lock, from a
// new session each time) still add theirs. Run etcd with automatic
// compaction, as Kubernetes' API server has it done every 5 minutes (etcd
// --auto-compaction-mode=periodic --auto-compaction-retention=5m); etcd's
// own documentation asks for it anyway, since the history otherwise grows
// until the space quota stops every write.
//
// # Least privilege
//
// With authentication on, dlock needs a user whose role may read and write
// the keys under its prefix, and nothing else (leases need no grant; etcd
// lets a user revoke a lease only if it may write every key attached to
// it, which holds for dlock's own sessions). For the prefix "app/" (the URL
// etcd://dlock-worker:PASSWORD@host:2379/app/; keys are app/NAME/…; a URL's
// prefix must end in "/", or Open refuses it: "app" would share its range
// with "app-b/", and so would a role granted over it):
//
//	etcdctl role add dlock-worker
//	etcdctl role grant-permission dlock-worker readwrite --prefix=true app/
//	etcdctl user add dlock-worker:PASSWORD --interactive=false
//	etcdctl user grant-role dlock-worker dlock-worker
//
// (as root, with --user root:…). The conformance suite's LeastPrivilege section runs these
// lines with Debian's etcdctl, then the conformance suite as that user. The
// default empty prefix needs a role over every key (etcdctl lock's
// layout), so give each service a prefix.
//
// A refused request gives an error that names what is missing (the role's
// permission on the prefix, a user when auth is on, or the credentials),
// keeps etcd's text ("etcdserver: permission denied") and wraps
// dlock.ErrInvalidConfig, so Lock fails at once instead of waiting out its
// ctx.
//
// Tenants are kept apart by prefix, and their prefixes must not nest: a
// client of "t/" reaches the lock x of a client of "t/b/" as its own "b/x"
// (and a role over "t/" grants "t/b/"). With roles over app-a/ and app-b/, b's
// user can neither take, release, force-release nor inspect a's locks, and
// a's holder keeps its lease (TestTenantsApart). Within one prefix etcd
// cannot tell holders apart: roles grant key ranges, not ownership, and a
// release deletes the holder's own key in the range, so any user with the
// prefix's role can delete any lock key under it, with dlock unlock --force
// or etcdctl del. Force unlock therefore needs no right beyond the worker
// grant of the prefix; an operator who force-unlocks across tenants needs a
// role over each prefix.
//
// What etcd does not keep apart. etcd has no per-lease permissions: leases
// belong to nobody, so any authenticated user may list every lease and keep
// any of them alive (etcdctl lease keep-alive ID). A tenant who keeps
// another's lease alive after its holder died keeps that lock held for as
// long as it likes, until the owning tenant force-unlocks it (dlock unlock
// --force deletes the key; revoking a lease needs write permission on its
// keys, which the other tenant lacks, so it can prolong the lease but not
// end it).
// Before etcd 3.4.26 and 3.5.9 (CVE-2023-32082; Debian's 3.4.23 is
// affected), lease timetolive --keys also shows any user the keys attached
// to any lease, that is the other tenants' lock names; Open warns (slog)
// when the server is such a version. Everything else is shared as on any
// cluster: one tenant's load (large values, many watches, compaction-heavy
// churn) slows every tenant's locks. So keep tenants on one etcd cluster
// only when they trust each other not to be hostile; where one could be,
// give each trust domain a cluster of its own. TestTenantAttacks holds
// these limits to what is written here; docs/security.md has the table.
package etcdlock

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/tlsurl"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// URL schemes of the backend.
const (
	Scheme    = "etcd"
	SchemeTLS = "etcds"
)

func init() {
	dlock.Register(Scheme, driver.OpenerFunc(openURL))
	dlock.Register(SchemeTLS, driver.OpenerFunc(openURL))
}

// Options configure Open.
type Options struct {
	// Prefix starts every lock key; "" (the default) matches etcdctl lock.
	// End it with "/" where it keeps tenants apart: "app" shares its range
	// with "app-b/" (a URL's prefix without one is refused).
	Prefix string
	// Client are options for the dlock client.
	Client []dlock.ClientOption
	// CloseClient makes Close of the dlock client close cli too.
	CloseClient bool
	// Logger receives warnings, such as a server whose lease API shows
	// every user the other tenants' lock names. Default slog.Default();
	// URLs log through the dlock client's logger.
	Logger *slog.Logger
}

// Open returns a dlock client over an existing etcd client.
func Open(ctx context.Context, cli *clientv3.Client, opts Options) (*dlock.Client, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	d, err := newDriver(ctx, cli, opts.Prefix, opts.CloseClient, log, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return dlock.New(d, Scheme, opts.Client...), nil
}

func openURL(ctx context.Context, u *url.URL) (driver.Driver, error) {
	q := u.Query()
	cfg := clientv3.Config{DialTimeout: 5 * time.Second, Logger: zapToSlog(driver.Logger(ctx)),
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 3 * time.Second}
	scheme := "http://"
	if u.Scheme == SchemeTLS {
		scheme = "https://"
		tc, err := tlsurl.Config(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("etcdlock: %w: %v", dlock.ErrInvalidURL, err)
		}
		cfg.TLS = tc
	} else if tlsurl.Has(q) {
		return nil, fmt.Errorf("etcdlock: %w: ca, cert, key and insecure_skip_verify need TLS: use etcds://", dlock.ErrInvalidURL)
	}
	for k, v := range q {
		if len(v) > 1 { // one of them would be used, silently
			return nil, fmt.Errorf("etcdlock: %w: %s is given %d times", dlock.ErrInvalidURL, k, len(v))
		}
		switch k {
		case "ca", "cert", "key", "insecure_skip_verify":
		case "dial_timeout":
			d, err := time.ParseDuration(q.Get(k))
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("etcdlock: %w: dial_timeout %q", dlock.ErrInvalidURL, q.Get(k))
			}
			cfg.DialTimeout = d
		default:
			return nil, fmt.Errorf("etcdlock: %w: unknown parameter %q", dlock.ErrInvalidURL, k)
		}
	}
	if p := strings.TrimPrefix(u.Path, "/"); p != "" && !strings.HasSuffix(p, "/") {
		// "app" would cover "app-b/…" too: tenant app's client reached
		// tenant app-b/'s lock x as its own "-b/x", and a role granted over
		// "app" grants app-b/ (an adversary pass).
		return nil, fmt.Errorf("etcdlock: %w: prefix %q: end it with \"/\" (etcd://host:2379/%s/): without it, its keys share a range with every prefix that starts with it (%q and %q), and so does a role granted over it",
			dlock.ErrInvalidURL, p, p, p, p+"-b/")
	}
	for _, h := range driver.Hosts(u) {
		if h == "" || strings.ContainsAny(h, "/ ") {
			return nil, fmt.Errorf("etcdlock: %w: bad host", dlock.ErrInvalidURL)
		}
		cfg.Endpoints = append(cfg.Endpoints, scheme+h)
	}
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("etcdlock: %w: want etcd://host:2379[,host:2379…]", dlock.ErrInvalidURL)
	}
	if cfg.TLS != nil { // a TLS URL against a plaintext server: say so at once
		if err := tlsurl.PlaintextServer(ctx, driver.Hosts(u)[0], "etcd://", nil); err != nil {
			return nil, fmt.Errorf("etcdlock: connect: %w", err)
		}
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	// With a user, clientv3.New authenticates before it returns, for up to
	// DialTimeout whatever Open's ctx says: give the client a context that
	// ends if ctx ends while New runs, and only then.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cfg.Context = life
	stop := context.AfterFunc(ctx, cancel)
	cli, err := clientv3.New(cfg)
	if !stop() {
		if err == nil {
			_ = cli.Close()
		}
		return nil, fmt.Errorf("etcdlock: connect: %w", context.Cause(ctx))
	}
	if err != nil {
		cancel()
		return nil, permErr(fmt.Errorf("etcdlock: connect: %w", err), strings.TrimPrefix(u.Path, "/"))
	}
	if err := connectionRefusal(ctx, cli, cfg.TLS, q.Has("cert"), cfg.DialTimeout); err != nil {
		_ = cli.Close()
		return nil, err
	}
	d, err := newDriver(ctx, cli, strings.TrimPrefix(u.Path, "/"), true, driver.Logger(ctx), cfg.DialTimeout)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return d, nil
}
