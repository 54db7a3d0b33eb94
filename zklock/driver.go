package zklock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	timeout time.Duration

	mu      sync.Mutex
	lost    chan struct{} // closed when the current session expires
	done    chan struct{} // closed when the event watcher ends
	closing chan struct{} // closed by Close
	bg      sync.WaitGroup
}

// session returns the channel closed when the current session expires.
func (d *zkDriver) session() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lost
}

// Lease is the ZooKeeper view of a held lock, reached with dlock's Lease.As.
type Lease struct {
	Path  string // the holder's node
	Czxid int64  // its creation zxid: the fencing token
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
	d := &zkDriver{conn: conn, owned: opts.CloseConn, root: root, acl: opts.ACL, timeout: opts.SessionTimeout,
		lost: make(chan struct{}), done: make(chan struct{}), closing: make(chan struct{})}
	// Wait for a session: a read proves it. A server still starting drops
	// the first attempts, so retry until ctx (bounded at 10s) ends.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		errc := make(chan error, 1)
		go func() { _, _, err := conn.Exists("/"); errc <- err }()
		var err error
		select {
		case err = <-errc:
		case <-ctx.Done():
			return nil, fmt.Errorf("zklock: connect: %w", ctx.Err())
		}
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("zklock: connect: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if opts.Events != nil {
		go d.watch(opts.Events)
	} else {
		close(d.done)
	}
	return d, nil
}

// watch ends every lease of the session when it expires. go-zookeeper then
// opens a new session, whose leases get a new channel.
func (d *zkDriver) watch(events <-chan zk.Event) {
	defer close(d.done)
	for ev := range events {
		if ev.State == zk.StateExpired {
			d.mu.Lock()
			close(d.lost)
			d.lost = make(chan struct{})
			d.mu.Unlock()
		}
	}
}

func (d *zkDriver) Caps() driver.Caps {
	return driver.Caps{MaxNameLen: 1024, MinTTL: time.Millisecond, TTLResolution: time.Millisecond, Blocking: true}
}

// lockPath maps a lock name to its node path, refusing names that are not
// valid ZooKeeper paths.
func (d *zkDriver) lockPath(name string) (string, error) {
	name = strings.TrimPrefix(name, "/")
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." || seg == "zookeeper" && !strings.Contains(name, "/") {
			return "", fmt.Errorf("zklock: %w: %q is not a ZooKeeper path (empty, . or .. segments)", dlock.ErrInvalidName, name)
		}
	}
	return d.root + "/" + name, nil
}

// ensure creates path and its parents as container nodes if missing.
func (d *zkDriver) ensure(path string) error {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	p := ""
	for _, part := range parts {
		p += "/" + part
		_, err := d.conn.CreateContainer(p, nil, zk.FlagContainer, d.acl)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// seq returns the sequence number of a lock child, or -1.
func seq(child string) int64 {
	i := strings.LastIndex(child, "lock-")
	if i < 0 {
		return -1
	}
	// Base 10 explicitly: the sequence has leading zeros, which fmt.Sscan
	// would read as octal.
	n, err := strconv.ParseInt(child[i+5:], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// sortedLockChildren returns the lock children of path in sequence order.
func (d *zkDriver) sortedLockChildren(path string) ([]string, error) {
	children, _, err := d.conn.Children(path)
	if err != nil {
		return nil, err
	}
	out := children[:0]
	for _, c := range children {
		if seq(c) >= 0 {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return seq(out[i]) < seq(out[j]) })
	return out, nil
}

func (d *zkDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Kind != driver.Exclusive {
		return driver.Grant{}, dlock.ErrUnsupported
	}
	path, err := d.lockPath(r.Name)
	if err != nil {
		return driver.Grant{}, err
	}
	lost := d.session() // before the create: a node is never older than its session
	node, err := d.create(ctx, path, r.Owner)
	if err != nil {
		return driver.Grant{}, err
	}
	mine := node[strings.LastIndex(node, "/")+1:]
	// The czxid (the token) is read while the queue is: one round trip.
	type stat struct {
		czxid int64
		err   error
	}
	czxid := make(chan stat, 1)
	go func() {
		ok, st, err := d.conn.Exists(node)
		if err == nil && !ok {
			err = zk.ErrNoNode
		}
		if err != nil {
			czxid <- stat{err: err}
			return
		}
		czxid <- stat{czxid: st.Czxid}
	}()
	token := func() (int64, error) {
		st := <-czxid
		czxid <- st
		return st.czxid, st.err
	}
	sent := time.Now()
	for {
		children, err := d.sortedLockChildren(path)
		if transient(err) && r.Wait && ctx.Err() == nil {
			// Connection loss: the session (and our place) may survive it.
			if err := d.pause(ctx, lost); err != nil {
				d.remove(node)
				return driver.Grant{}, err
			}
			continue
		}
		if err != nil {
			d.remove(node)
			return driver.Grant{}, fmt.Errorf("zklock: children: %w", err)
		}
		i := slices.Index(children, mine)
		switch {
		case i < 0:
			return driver.Grant{}, fmt.Errorf("zklock: %w: our node %s vanished (session expired)", errRetry, node)
		case i == 0:
			cz, err := token()
			if err != nil {
				d.remove(node)
				return driver.Grant{}, fmt.Errorf("zklock: stat %s: %w", node, err)
			}
			return driver.Grant{Acquired: true, Token: uint64(cz), Holds: 1, Since: sent,
				Validity: min(r.TTL, d.timeout), Lost: lost, Handle: &Lease{Path: node, Czxid: cz}}, nil
		case !r.Wait:
			d.remove(node)
			return driver.Grant{}, nil
		}
		exists, _, ch, err := d.conn.ExistsW(path + "/" + children[i-1]) // only the one before ours
		if transient(err) {
			continue // read again, which pauses while the connection is down
		}
		if err != nil {
			d.remove(node)
			return driver.Grant{}, fmt.Errorf("zklock: watch: %w", err)
		}
		if !exists {
			sent = time.Now()
			continue
		}
		select {
		case <-ch:
			sent = time.Now()
		case <-ctx.Done():
			d.remove(node)
			return driver.Grant{}, ctx.Err()
		case <-lost:
			return driver.Grant{}, fmt.Errorf("zklock: %w: session expired while waiting", errRetry)
		}
	}
}

// errRetry marks failures after which a new attempt may succeed: the
// session expired, and with it our node.
var errRetry = errors.New("try again")

// transient reports errors after which the connection (and the session)
// may come back.
func transient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionMoved)
}

// pause waits a moment before retrying after connection loss; it fails
// when ctx ends or the session expires.
func (d *zkDriver) pause(ctx context.Context, lost <-chan struct{}) error {
	select {
	case <-time.After(50 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-lost:
		return fmt.Errorf("zklock: %w: session expired", errRetry)
	}
}

// create makes our contender node, protected as Curator does: its name
// carries a fresh GUID, so when a reply is lost with the connection, the
// node is found by GUID instead of created twice (which would leave an
// orphan that holds the lock for the rest of the session).
func (d *zkDriver) create(ctx context.Context, path, owner string) (string, error) {
	guid, err := newGUID()
	if err != nil {
		return "", err
	}
	prefix := path + "/_c_" + guid + "-lock-"
	for attempt := 0; ; attempt++ {
		node, err := d.conn.Create(prefix, []byte(owner), zk.FlagEphemeral|zk.FlagSequence, d.acl)
		switch {
		case err == nil:
			return node, nil
		case errors.Is(err, zk.ErrNoNode) && attempt < 5:
			// The first lock of a name, or the server reaped an empty parent.
			if err := d.ensure(path); err != nil && !transient(err) {
				return "", fmt.Errorf("zklock: create %s: %w", path, err)
			}
			continue
		case errors.Is(err, zk.ErrSessionExpired):
			continue // the node went with the session, if it was made
		case !transient(err):
			return "", fmt.Errorf("zklock: create: %w", err)
		}
		// The create may have happened: look for it before trying again.
		for {
			node, ferr := d.findGUID(path, guid)
			if node != "" {
				return node, nil
			}
			if ferr == nil || ctx.Err() != nil {
				break
			}
			if perr := d.pause(ctx, nil); perr != nil {
				break
			}
		}
		if ctx.Err() != nil || attempt >= 100 {
			d.cleanup(path, guid)
			return "", fmt.Errorf("zklock: create: %w", errors.Join(ctx.Err(), err))
		}
	}
}

// findGUID returns the child of path whose name carries guid, if any.
func (d *zkDriver) findGUID(path, guid string) (string, error) {
	children, _, err := d.conn.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, c := range children {
		if strings.HasPrefix(c, "_c_"+guid+"-") {
			return path + "/" + c, nil
		}
	}
	return "", nil
}

// remove deletes a contender node we give up. If the connection is down it
// keeps trying in the background until the node or its session is gone:
// a node left behind would hold the lock for the rest of the session.
func (d *zkDriver) remove(node string) {
	err := d.conn.Delete(node, -1)
	if !transient(err) {
		return
	}
	d.background(func() bool {
		err := d.conn.Delete(node, -1)
		return !transient(err)
	})
}

// cleanup deletes the node a failed create may have made, found by GUID.
func (d *zkDriver) cleanup(path, guid string) {
	d.background(func() bool {
		node, err := d.findGUID(path, guid)
		if err != nil {
			return !transient(err)
		}
		if node != "" {
			return !transient(d.conn.Delete(node, -1))
		}
		return true
	})
}

// background runs step every 100ms until it reports done, the session
// expires (taking our ephemeral nodes with it) or the driver closes.
func (d *zkDriver) background(step func() (done bool)) {
	lost := d.session()
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if step() {
					return
				}
			case <-lost:
				return
			case <-d.closing:
				return
			}
		}
	}()
}

// newGUID returns a random UUID, the form Curator puts in protected names.
func newGUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]), nil
}

// renewInFlight bounds the node checks one renewal tick has outstanding.
const renewInFlight = 64

// Renew checks that each holder's node still exists, with up to
// renewInFlight checks in flight on the connection at once (10,000 leases
// checked one by one would outlast the renewal interval). The session
// keeps the nodes; a hold is valid for the session timeout from the check's
// sending.
func (d *zkDriver) Renew(_ context.Context, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(len(batch), renewInFlight) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res[i] = d.check(batch[i])
			}
		}()
	}
	for i := range batch {
		next <- i
	}
	close(next)
	wg.Wait()
	return res
}

func (d *zkDriver) check(h driver.Held) driver.RenewResult {
	l := h.Handle.(*Lease)
	ok, stat, err := d.conn.Exists(l.Path)
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return driver.RenewResult{Err: fmt.Errorf("zklock: %w: session expired", dlock.ErrLeaseLost)}
	case err != nil:
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew: %w", err)}
	case !ok || stat.Czxid != l.Czxid:
		return driver.RenewResult{Err: fmt.Errorf("zklock: %w: the node %s is gone", dlock.ErrLeaseLost, l.Path)}
	}
	return driver.RenewResult{Validity: min(h.TTL, d.timeout)} // counted by dlock from this tick's start, before sent
}

func (d *zkDriver) Release(_ context.Context, h driver.Held, _ int) (int, error) {
	l, ok := h.Handle.(*Lease)
	if !ok {
		return 0, fmt.Errorf("zklock: release: %w", dlock.ErrLeaseLost)
	}
	// The path carries this contender's GUID: no one else's node can have
	// it, so an unconditional delete only ever removes our own.
	err := d.conn.Delete(l.Path, -1)
	switch {
	case transient(err):
		// A lease dlock gave up as lost, or an Unlock with the connection
		// down: the node would hold the lock for the rest of the session.
		d.remove(l.Path)
		return 0, fmt.Errorf("zklock: release: %w (deleting again once reconnected, until the node or its session is gone)", err)
	case errors.Is(err, zk.ErrNoNode):
		return 0, fmt.Errorf("zklock: release: %w: the node is gone", dlock.ErrLeaseLost)
	case err != nil:
		return 0, fmt.Errorf("zklock: release: %w", err)
	}
	return 0, nil
}

func (d *zkDriver) holder(name string) (string, *zk.Stat, []byte, int, error) {
	path, err := d.lockPath(name)
	if err != nil {
		return "", nil, nil, 0, err
	}
	children, err := d.sortedLockChildren(path)
	if errors.Is(err, zk.ErrNoNode) || (err == nil && len(children) == 0) {
		return "", nil, nil, 0, nil
	}
	if err != nil {
		return "", nil, nil, 0, err
	}
	node := path + "/" + children[0]
	data, stat, err := d.conn.Get(node)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil, nil, 0, nil
	}
	return node, stat, data, len(children) - 1, err
}

func (d *zkDriver) Inspect(_ context.Context, name string) (driver.Info, error) {
	info := driver.Info{Name: name}
	node, stat, data, waiters, err := d.holder(name)
	if err != nil || node == "" {
		return info, err
	}
	info.Held, info.Owner, info.Holds, info.Token, info.Waiters = true, string(data), 1, uint64(stat.Czxid), waiters
	info.Notes = []string{"holder node " + node}
	return info, nil
}

func (d *zkDriver) ForceRelease(_ context.Context, name string) error {
	node, _, _, _, err := d.holder(name)
	if err != nil || node == "" {
		return err
	}
	if err := d.conn.Delete(node, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("zklock: force release: %w", err)
	}
	return nil
}

func (d *zkDriver) Close() error {
	close(d.closing)
	d.bg.Wait()
	if d.owned {
		d.conn.Close()
		<-d.done
	}
	return nil
}

// As sets **zk.Conn targets.
func (d *zkDriver) As(target any) bool {
	if p, ok := target.(**zk.Conn); ok {
		*p = d.conn
		return true
	}
	return false
}
