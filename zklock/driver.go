package zklock

import (
	"context"
	"errors"
	"fmt"
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
	vetted       map[string]bool // lock paths whose nodes vet passed (tenant.go)
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
