// Package zklock is the dlock backend for ZooKeeper, through
// github.com/go-zookeeper/zk: the ephemeral-sequential lock recipe of
// ZooKeeper's documentation, with the node layout of Apache Curator's
// InterProcessMutex.
//
// # URLs
//
//	zk://[user:password@]host:2181[,host2:2181…][/chroot][?session_timeout=10s][&acl=scheme:id:perms,…]
//
//	zk://host:2281[,host2:2281…][/chroot]?tls=true[&ca=/etc/dlock/ca.pem&cert=client.pem&key=client-key.pem]
//
// user:password adds digest authentication, and nodes dlock creates then
// carry a creator-only digest ACL; acl adds ZooKeeper ACL entries to every
// node dlock creates (perms are letters of crwda), e.g.
// acl=digest:ops:HASH:rd (see "Least privilege"). Users with a connection
// already use Open (and Options.ACL).
//
// # TLS
//
// tls=true speaks TLS (1.2 or later) to ZooKeeper's secure client port
// (secureClientPort, which needs serverCnxnFactory=NettyServerCnxnFactory
// on the server), verifying each certificate against the host as written
// in the URL (go-zookeeper dials the addresses a host resolves to) with the
// system's CAs or the PEM file ca= names; cert= and key= give a client
// certificate (ssl.clientAuth). Only insecure_skip_verify=true turns
// verification off. TLS parameters without tls=true are refused, not
// ignored. A refused certificate, or a plaintext URL against a TLS-only
// port (dlock then checks, with a handshake of its own, that the port
// speaks TLS), ends Open at once with the reason instead of go-zookeeper
// retrying until the session wait times out. Errors never show a key's
// path.
//
// # Layout: Curator's
//
// The lock NAME is the path <chroot>/NAME (so "orders/sku-42" is the node
// /orders/sku-42). A name must be a path ZooKeeper accepts: no empty, "."
// or ".." components and none of the characters it refuses (controls
// U+0001–U+001F and U+007F–U+009F, U+D800–U+F8FF, U+FFF0–U+FFFF, and every
// character above U+FFFF, such as emoji); Lock and TryLock refuse others
// with ErrInvalidName before sending anything. Two distinct names are
// always two locks, so names that would share a node, or whose node would
// pass for a contender of another lock, are refused too: a leading "/"
// ("/a" would be the node of "a"), and a component after the first named
// like a contender node (starting with "_c_", ending in "lock-" or
// "latch-" and digits, or holding "__READ__" or "__WRIT__"), which the
// lock of the parent name would count as a holder, or named "locks" or
// "leases", a semaphore's own nodes (see "Read-write locks and
// semaphores" below); and without a chroot, names under "zookeeper",
// ZooKeeper's own node. A chroot follows the same rules (Open refuses it
// with ErrInvalidURL).
//
// A contender creates an EPHEMERAL_SEQUENTIAL child named
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
// # Read-write locks and semaphores: Curator's layouts
//
// A read-write lock NAME has the layout of Curator's
// InterProcessReadWriteLock on the node <chroot>/NAME: EPHEMERAL_SEQUENTIAL
// children _c_<guid>-__READ__<seq> and _c_<guid>-__WRIT__<seq>, protected
// as the mutex's are. A writer holds when its node is the first of them; a
// reader when no writer's node comes before its own, so a queued writer
// keeps later readers out (Curator's writer preference). A writer watches
// the node just before its own, a reader the last writer's node before its
// own (Curator's reader watches the first; both look again when it goes).
// The mutex of the same name uses lock- children of the same node and is
// another lock, as in Curator.
//
// A semaphore NAME has the layout of Curator's InterProcessSemaphoreV2 on
// <chroot>/NAME: a contender takes the mutex <chroot>/NAME/locks (an
// InterProcessMutex), creates _c_<guid>-lease-<seq> under
// <chroot>/NAME/leases, holds a permit once leases has no more children
// than the limit (waiting, watching the children, while it has more), and
// then releases the mutex (in the create's transaction when there is room
// at once). So Curator's leases and dlock's permits count against one
// limit, served in the order of the mutex. Acquisition is serialized by the
// mutex: each grant costs at least one write (one fsync of the server's
// log) while the mutex is held, whatever the limit. A TryAcquire that
// finds the mutex taken while a permit looks free tries again for a moment
// (the holder of the mutex is on its way to a permit).
//
// The permit count: Curator's layout has no place for it (each Curator
// client counts with its own maxLeases, or a SharedCount at a path of the
// user's choosing). dlock keeps it in the data of the leases node, in
// SharedCount's encoding (a 4-byte big-endian int), written by the create
// of each permit's node and checked under the semaphore's mutex: a dlock
// client asking for another count while the semaphore has leases fails
// with ErrLimitMismatch, and with none its count replaces the old (the
// server removes the empty leases container, and the count with it).
// Curator holders neither write nor check it: a Curator client must be
// given the same count by its own configuration.
//
// Tokens are the czxid of the hold's node, as for the mutex: they increase
// in queue order, so a write hold's token is greater than that of every
// earlier hold of the lock, reads included, and each permit (created under
// the mutex, so in grant order) has its own. Readers granted together may
// return in another order than their tokens'. Holds end with the session,
// as a mutex hold does.
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
// A client opened from a URL also gives up a connection whose handshake
// has not ended within 2/3 of the session timeout (at most the timeout
// divided among the servers), and dials again: a ZooKeeper that is starting
// up can accept a connection and never answer it, and go-zookeeper alone
// waits ten times that for the answer (13 s with a 2 s session) while the
// session expires. A connection made by the caller and passed to Open keeps
// go-zookeeper's own wait. When every server of the URL refuses the
// connection (nothing listens there) and none has accepted one, Open fails
// at once with the refusal (errors.Is syscall.ECONNREFUSED), as the Redis
// and etcd backends do, rather than waiting for a session until its ctx
// ends (at most 10 s).
//
// # TTL limits
//
// A hold lasts as long as the session, so it is proven for session_timeout
// (less the slack) after each answer, whatever the TTL. dlock returns a
// grant only with TTL/100 + 2ms + min(TTL/10, 1s) of its proof left and
// declares a lease lost TTL/100 + 2ms before the proof runs out, so a TTL
// can be at most about 100 × (¾ × session_timeout − 1s): 10 min with the
// default 10s session, 41s with 2s. A longer TTL is refused when the lock
// is made (ErrInvalidTTL, naming the session timeout); raise
// session_timeout (up to the server's maxSessionTimeout, 20 ticks by
// default) to allow it. Within the limit the TTL sets the renewal pace.
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
// # Elections
//
// Client.Election uses Apache Curator's LeaderLatch layout: a candidate's
// node is _c_<guid>-latch-<sequence> under the election's node, with its
// value (Curator's participant id) as data; the lowest sequence leads and
// its czxid is the term. LeaderLatch candidates and dlock's elect one
// leader, and LeaderLatch.getLeader reads dlock's value (tested both ways).
// Proclaim returns ErrUnsupported: rewriting the leader's node fires the
// watch Curator's next candidate keeps on it, which Curator does not set
// again for a data change, so that candidate would never lead. dlock orders
// latch- and lock- children together: a lock and an election of one name
// are one queue.
//
// # Guarantees
//
//   - Mutual exclusion through ZooKeeper's ordered, replicated writes: a
//     majority of the ensemble must be up to grant a lock.
//   - Fencing token = the czxid of the holder's node: ensemble-wide and
//     increasing with each new holder; safe for fencing.
//   - TryLock and ctx cancellation delete the contender's node.
//   - Re-entry by owner is counted within a client, not in ZooKeeper.
//   - Each of these holds while the ensemble keeps the writes it
//     acknowledged. ZooKeeper 3.8.0 (Debian 12's package) can lose them
//     when the leader dies while a restarted member is still syncing: the
//     member's sync thread can die with the leader's connection
//     (ZOOKEEPER-4541, ZOOKEEPER-4712, fixed in 3.9.3), the member can
//     then win the next election with a stale log, and the ensemble can
//     come back with its tree seconds old. A released node then comes
//     back in its holder's live session and keeps the lock until that
//     session ends, and a grant can be undone. Restart members one at a
//     time, each once the last serves again (srvr reports leader or
//     follower), and prefer a release with the fixes (docs/reliability.md).
//
// # Per-name state
//
// No token counter: tokens are zxids. A name's lock node (and the parents
// of a name with slashes) are container nodes, which the server removes
// once they have been empty for a while; the chroot is not (see "Least
// privilege").
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
// compute; write it as it is, '+' and '/' included: dlock reads a '+' in
// the acl parameter as '+', not as a space, and refuses an entry whose
// digest does not decode to a SHA-1, so a grant never silently names
// nobody). Create the chroot yourself first if it must carry other
// entries; ZooKeeper's own "/" stays world-writable unless you change it.
//
// The chroot is a persistent node that dlock keeps a node in
// ("dlock-chroot", which no lock can be named), so it is never empty: an
// empty one was a container the server removed (and any client may delete
// an empty child of "/"), so another tenant could make it again, open to
// all, and reach this tenant's locks. ZooKeeper does not say who made a
// node, so Open judges a chroot made before by its ACL alone:
//
//   - a client that may create there (a tenant) refuses it unless every
//     entry granting read, create, delete or re-ACL is its identity's or
//     an acl= entry, exactly; the superuser, which the chroot does not
//     name, refuses only entries that grant many at once (world, ip,
//     auth);
//   - a client that may not create there (an operator with rd) refuses it
//     if anyone, or an address range, may re-ACL it;
//   - a client that may create there but not read its ACL refuses it.
//
// Two digest entries of one user (two passwords: anyone may authenticate
// as either) are refused, and so is a digest entry whose hash getACL hides
// from this client (it has no admin there: the entry may be such a second
// password; dlock's own nodes grant their creator admin). An entry of an
// acl= identity must not grant more than the acl= entry does.
//
// Another identity that made the chroot first could leave lock nodes in
// it, open to all, and then narrow the chroot's ACL to this tenant's (a
// re-test pass took a tenant's lock so). So each lock, read or write hold,
// permit and campaign first judges, by the rules above (with write too: a
// semaphore's limit is its node's data), the chroot, the lock's node and
// each node between, and fails with dlock.ErrInvalidConfig naming a node
// that fails, or one that does not grant this identity create, before
// making a contender there. A node that names this identity and passed is
// not read again by this client: only its identities may create, delete
// or re-ACL there, so what is under it stays theirs. A node still missing
// is read once made; a node that does not name this identity (the
// superuser's view) at every lock. The superuser trusts any one
// identity's entries, a tenant's nodes being the tenant's to change: in a
// tenant's chroot, that tenant can release the superuser's holds. A
// superuser whose acl= grants the tenant create is named by the tenant's
// nodes, and judged as a co-tenant (the tenant's acl= list and its own
// must then agree).
//
// Limits: an identity this client's acl= grants create or admin (a
// co-tenant) is trusted as this client is, since it could release this
// client's holds itself: the nodes it makes carry its own URL's acl=
// entries, and a node this client judged is not read again, so a
// co-tenant whose acl= names others extends the trust to them (a re-test
// pass). Give co-tenants one and the same acl= list. An operator whose
// acl= entry grants c is a co-tenant, and is refused a tenant's chroot
// (open it as the superuser, or grant rd). Make
// each tenant's chroot yourself, as an operator, before its first Open,
// under a node only operators may create in; then no other identity can
// have made it first.
// The conformance suite's LeastPrivilege section runs as such an
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
	self    []zk.ACL // set by openURL: the URL identity's own entry, if it has one
}

// Open returns a dlock client over an existing ZooKeeper connection.
func Open(ctx context.Context, conn *zk.Conn, opts Options) (*dlock.Client, error) {
	d, err := newDriver(ctx, conn, "", opts)
	if err != nil {
		return nil, err
	}
	return dlock.New(d, Scheme, opts.Client...), nil
}
