package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/go-zookeeper/zk"
)

type zkDriver struct {
	conn    *zk.Conn
	owned   bool
	root    string // chroot, "" or "/x"
	acl     []zk.ACL
	self    []zk.ACL      // the URL identity's own ACL entry, if any
	timeout time.Duration // the session timeout asked for; see sessionTimeout
	granted *granted      // the timeout the server granted, if the driver dialled

	mu   sync.Mutex
	cur  *session        // the session as last seen; see current
	done chan struct{}   // closed when the session monitor ends
	life context.Context // ends with Close: background work stops
	stop context.CancelFunc
	bg   sync.WaitGroup

	parentsMu    sync.Mutex
	emptyParents map[string]bool // lock paths whose node is known to hold no data
	noMulti      atomic.Bool     // the parent write was refused (ACL): create alone

	provedTokens atomic.Int64 // tokens createAndRead proved without a read
	statTokens   atomic.Int64 // tokens taken from a create's parent stat
}

// Lease is the ZooKeeper view of a held lock, reached with dlock's Lease.As.
type Lease struct {
	Path  string // the holder's node
	Czxid int64  // its creation zxid: the fencing token

	sess  *session // the session the node lives in
	mu    sync.Mutex
	check *existsCheck // the last check that the node exists, maybe still in flight
}

// As sets **Lease targets.
func (l *Lease) As(target any) bool {
	if p, ok := target.(**Lease); ok {
		*p = l
		return true
	}
	return false
}

func newDriver(ctx context.Context, conn *zk.Conn, root string, opts Options) (*zkDriver, error) {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 10 * time.Second
	}
	if opts.ACL == nil {
		opts.ACL = zk.WorldACL(zk.PermAll)
	}
	d := &zkDriver{conn: conn, owned: opts.CloseConn, root: root, acl: opts.ACL, self: opts.self, timeout: opts.SessionTimeout,
		granted: opts.granted, done: make(chan struct{})}
	d.life, d.stop = context.WithCancel(context.Background())
	// Wait for a session: a read proves it. A server still starting drops
	// the first attempts, so retry until ctx (bounded at 10s) ends.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d.cur = newSession(0)
	for {
		s := d.current()
		_, err := d.call(ctx, s, func() error { _, _, err := conn.Exists("/"); return err })
		if errors.Is(err, errNoReply) {
			return nil, fmt.Errorf("zklock: connect: %w", ctx.Err())
		}
		if err == nil && !s.lastHeard().IsZero() {
			break
		}
		if err == nil {
			continue // answered as the session was made: again, in it
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("zklock: connect: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := d.claimChroot(ctx); err != nil {
		d.stop()
		return nil, err
	}
	go d.monitor(opts.Events)
	return d, nil
}

// chrootMarker is the persistent node dlock keeps in a chroot, so that the
// chroot is never empty: an empty one was a container node the server
// removed (and ZooKeeper's "/" lets anyone delete an empty child), and
// another tenant then made it again, open to all, and reached this
// tenant's locks (an adversary pass). No lock can be named so.
const chrootMarker = "dlock-chroot"

// claimChroot makes the chroot, and its parents, if missing, with the
// client's ACL, and keeps chrootMarker in it; then it refuses a chroot
// that another identity could reach this client's locks through.
// ZooKeeper does not say who made a node: the chroot's ACL is all there is
// to judge by (an adversary pass squatted chroots in many shapes).
//
//   - A client that may create there (a tenant, or the superuser) refuses
//     the chroot unless every entry granting create, delete, admin or read
//     is one of this client's own ACL (its identity, the acl= entries) or,
//     for a client whose identity the chroot does not name (the
//     superuser), an entry naming one identity (digest, x509, sasl), not
//     many (world, ip, auth). It refuses one whose ACL it cannot read.
//   - A client that may not create there (an operator with rd, or a tenant
//     in another's chroot) refuses it if anyone at all, or an address
//     range, may re-ACL it: its requests would be refused now, and pass
//     once that ACL is changed.
//
// Without a chroot, or with an ACL open to all (no identity in the URL),
// there are no tenants apart to keep.
func (d *zkDriver) claimChroot(ctx context.Context) error {
	if d.root == "" || openACL(d.acl) {
		return nil
	}
	s := d.current()
	if err := d.ensure(ctx, s, d.root); err != nil {
		return chrootErr(d.root, err)
	}
	_, err := d.call(ctx, s, func() error { _, err := d.conn.Create(d.root+"/"+chrootMarker, nil, 0, d.acl); return err })
	creator := true
	switch {
	case errors.Is(err, zk.ErrNoAuth):
		creator = false
	case err != nil && !errors.Is(err, zk.ErrNodeExists):
		return chrootErr(d.root, err)
	}
	var acl []zk.ACL
	if _, err := d.call(ctx, s, func() (err error) { acl, _, err = d.conn.GetACL(d.root); return err }); errors.Is(err, zk.ErrNoAuth) {
		if !creator {
			return nil // nor may it read there: each of its requests is refused, and says so
		}
		return fmt.Errorf("zklock: %w: this identity may make nodes in the chroot %s but not read its ACL: "+
			"dlock cannot tell whether another tenant may reach its locks there; grant it r", dlock.ErrInvalidConfig, d.root)
	} else if err != nil {
		return fmt.Errorf("zklock: chroot %s: %w", d.root, err)
	}
	has := func(in []zk.ACL, e zk.ACL) bool {
		return slices.ContainsFunc(in, func(a zk.ACL) bool { return sameID(a, e) })
	}
	// An entry is this client's when one of its own names the identity
	// with at least the entry's rights: ops:cdrwa is not an acl= ops:rd
	// (a re-test pass).
	covered := func(e zk.ACL) bool {
		return slices.ContainsFunc(d.acl, func(a zk.ACL) bool { return sameID(a, e) && e.Perms&^a.Perms == 0 })
	}
	named := slices.ContainsFunc(d.self, func(e zk.ACL) bool { return has(acl, e) })
	users := map[string]bool{}
	for _, e := range acl {
		if e.Scheme != "digest" {
			continue
		}
		// Anyone may authenticate as a digest user with another password:
		// a:evil beside a's own entry passed as a's (a re-test pass).
		u, _, _ := strings.Cut(e.ID, ":")
		if users[u] {
			return fmt.Errorf("zklock: %w: the chroot %s names the digest user %q twice, with two passwords: anyone may authenticate as either; "+
				"delete it (dlock makes it again), or set its ACL to this identity's and the acl= entries", dlock.ErrInvalidConfig, d.root, u)
		}
		users[u] = true
	}
	for _, e := range acl {
		many := e.Scheme == "world" || e.Scheme == "ip" || e.Scheme == "auth"
		var bad bool
		switch {
		case !creator:
			bad = e.Perms&zk.PermAdmin != 0 && many
		case named:
			bad = e.Perms&(zk.PermCreate|zk.PermDelete|zk.PermAdmin|zk.PermRead) != 0 && !covered(e)
		default:
			bad = e.Perms&(zk.PermCreate|zk.PermDelete|zk.PermAdmin|zk.PermRead) != 0 && many && !covered(e)
		}
		if bad {
			return fmt.Errorf("zklock: %w: the chroot %s lets %s:%s read, create, delete or re-ACL its nodes, which this URL's identity and acl= entries do not name: "+
				"another client made it, or it was given more; through it another tenant could list, take or release this tenant's locks. "+
				"Delete it (dlock makes it again), or set its ACL to this identity's and the acl= entries", dlock.ErrInvalidConfig, d.root, e.Scheme, e.ID)
		}
	}
	return nil
}

// openACL reports whether acl lets anyone do anything: no identity to keep
// apart from others.
func openACL(acl []zk.ACL) bool {
	return slices.ContainsFunc(acl, func(a zk.ACL) bool {
		return a.Scheme == "world" && a.ID == "anyone" && a.Perms&(zk.PermCreate|zk.PermDelete) == zk.PermCreate|zk.PermDelete
	})
}

func (d *zkDriver) Caps() driver.Caps {
	return driver.Caps{MaxNameLen: 1024, MinTTL: time.Millisecond, TTLResolution: time.Millisecond, Blocking: true,
		MaxTTL: maxTTL(d.valid()),
		TTLNote: fmt.Sprintf("a ZooKeeper hold lasts as long as its session, proven for %v (the session timeout %v, less slack) after each answer, "+
			"and dlock needs a hold to be proven for well over TTL/100 + 1s; raise session_timeout (the server's maxSessionTimeout, "+
			"20 ticks by default, caps it) for a longer TTL", d.valid(), d.sessionTimeout()),
		Kinds: []driver.Kind{driver.Shared, driver.Write, driver.Permit}}
}

// maxTTL is the longest TTL a hold proven for valid at a time can be given:
// dlock returns a grant only with TTL/100 + 2ms + min(TTL/10, 1s) of its
// validity left, and declares a lease lost TTL/100 + 2ms before its proof
// runs out, so a longer TTL would have every grant released as too late,
// or every lease lost at once. A quarter of valid is kept for the round
// trip and for scheduling.
func maxTTL(valid time.Duration) time.Duration {
	budget := valid*3/4 - 2*time.Millisecond // for TTL/100 + min(TTL/10, 1s)
	var ttl time.Duration
	if budget >= 1100*time.Millisecond { // TTL ≥ 10s: TTL/100 + 1s
		ttl = (budget - time.Second) * 100
	} else { // TTL/100 + TTL/10 = 11·TTL/100
		ttl = budget * 100 / 11
	}
	return max(ttl.Truncate(time.Second), time.Second)
}

// ensure creates path and its parents if missing: the chroot and its
// parents as persistent nodes, the nodes of names below it as container
// nodes, which the server removes once empty.
func (d *zkDriver) ensure(ctx context.Context, s *session, path string) error {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	p := ""
	for _, part := range parts {
		p += "/" + part
		node := p
		_, err := d.call(ctx, s, func() error {
			if len(node) <= len(d.root) {
				_, err := d.conn.Create(node, nil, 0, d.acl)
				return err
			}
			_, err := d.conn.CreateContainer(node, nil, zk.FlagContainer, d.acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

func (d *zkDriver) Close() error {
	d.stop()
	d.bg.Wait()
	<-d.done
	if d.owned {
		d.conn.Close()
	}
	return nil
}

// As sets **zk.Conn targets.
func (d *zkDriver) As(target any) bool {
	switch p := target.(type) {
	case **zk.Conn:
		*p = d.conn
		return true
	case **zkDriver: // for the package's tests
		*p = d
		return true
	}
	return false
}

// permErr returns err unchanged unless ZooKeeper refused it for want of an
// ACL permission (zk.ErrNoAuth) or refused the credentials. It then names
// what is missing and the lock's node, keeps ZooKeeper's own text, and wraps
// dlock.ErrInvalidConfig: waiting cannot cure a missing permission, so a
// Lock fails at once instead of retrying until its ctx ends.
func (d *zkDriver) permErr(err error, name string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoAuth):
		path, _ := d.lockPath(name)
		return fmt.Errorf("zklock: missing ACL permission on %s or its parents for this client's identity: "+
			"a node's ACL is set by the client that created it (see the zklock package doc) (%w): %w",
			path, dlock.ErrInvalidConfig, err)
	case errors.Is(err, zk.ErrAuthFailed):
		return fmt.Errorf("zklock: ZooKeeper refused the credentials (%w): %w", dlock.ErrInvalidConfig, err)
	}
	return err
}

// sameID reports whether two ACL entries name the same identity. A digest
// entry whose hash ZooKeeper hid ("a:x": getACL hides it from a client
// without admin on the node) is compared by its user; claimChroot refuses
// an ACL naming one user twice, so that user is this one.
func sameID(a, b zk.ACL) bool {
	if a.Scheme != b.Scheme {
		return false
	}
	if a.Scheme == "digest" {
		ua, ha, _ := strings.Cut(a.ID, ":")
		ub, hb, _ := strings.Cut(b.ID, ":")
		if ha == "x" || hb == "x" { // hidden: by user (two passwords of one user are refused apart)
			return ua == ub
		}
	}
	return a.ID == b.ID
}

// chrootErr is claimChroot's error: a refused create wraps
// dlock.ErrInvalidConfig, as permErr's do.
func chrootErr(root string, err error) error {
	if errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("zklock: %w: this identity may not create the chroot %s or nodes in it "+
			"(a node's ACL is set by the client that made it; see the zklock package doc): %w", dlock.ErrInvalidConfig, root, err)
	}
	return fmt.Errorf("zklock: chroot %s: %w", root, err)
}
