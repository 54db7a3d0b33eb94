package zklock

import (
	"context"
	"errors"
	"fmt"
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

	lost     chan struct{} // closed when the session expires
	lostOnce sync.Once
	done     chan struct{} // closed when the event watcher ends
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
		lost: make(chan struct{}), done: make(chan struct{})}
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

// watch ends every lease of the session when it expires.
func (d *zkDriver) watch(events <-chan zk.Event) {
	defer close(d.done)
	for ev := range events {
		if ev.State == zk.StateExpired {
			d.lostOnce.Do(func() { close(d.lost) })
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
	var node string
	for attempt := 0; ; attempt++ {
		// Create first; make the parents only when they are missing (the
		// first lock of a name, or after the server reaped an empty one).
		node, err = d.conn.CreateProtectedEphemeralSequential(path+"/lock-", []byte(r.Owner), d.acl)
		if errors.Is(err, zk.ErrNoNode) && attempt < 3 {
			if err := d.ensure(path); err != nil {
				return driver.Grant{}, fmt.Errorf("zklock: create %s: %w", path, err)
			}
			continue
		}
		if err != nil {
			return driver.Grant{}, fmt.Errorf("zklock: create: %w", err)
		}
		break
	}
	mine := node[strings.LastIndex(node, "/")+1:]
	giveUp := func() { _ = d.conn.Delete(node, -1) } // leave nothing behind
	for {
		children, err := d.sortedLockChildren(path)
		if err != nil {
			giveUp()
			return driver.Grant{}, fmt.Errorf("zklock: children: %w", err)
		}
		i := -1
		for j, c := range children {
			if c == mine {
				i = j
				break
			}
		}
		switch {
		case i < 0:
			return driver.Grant{}, fmt.Errorf("zklock: %w: our node %s vanished", dlock.ErrLeaseLost, node)
		case i == 0:
			sent := time.Now()
			ok, stat, err := d.conn.Exists(node)
			if err != nil || !ok {
				giveUp()
				return driver.Grant{}, fmt.Errorf("zklock: stat: %v", err)
			}
			return driver.Grant{Acquired: true, Token: uint64(stat.Czxid), Holds: 1, Since: sent,
				Validity: min(r.TTL, d.timeout), Lost: d.lost, Handle: &Lease{Path: node, Czxid: stat.Czxid}}, nil
		case !r.Wait:
			giveUp()
			return driver.Grant{}, nil
		}
		exists, _, ch, err := d.conn.ExistsW(path + "/" + children[i-1]) // only the one before ours
		if err != nil {
			giveUp()
			return driver.Grant{}, fmt.Errorf("zklock: watch: %w", err)
		}
		if !exists {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			giveUp()
			return driver.Grant{}, ctx.Err()
		case <-d.lost:
			return driver.Grant{}, fmt.Errorf("zklock: %w: session expired while waiting", dlock.ErrLeaseLost)
		}
	}
}

// Renew checks that each holder's node still exists. The session keeps it;
// a hold is valid for the session timeout from the check's sending.
func (d *zkDriver) Renew(_ context.Context, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
	for i, h := range batch {
		l := h.Handle.(*Lease)
		ok, stat, err := d.conn.Exists(l.Path)
		switch {
		case errors.Is(err, zk.ErrSessionExpired):
			res[i].Err = fmt.Errorf("zklock: %w: session expired", dlock.ErrLeaseLost)
		case err != nil:
			res[i].Err = fmt.Errorf("zklock: renew: %w", err)
		case !ok || stat.Czxid != l.Czxid:
			res[i].Err = fmt.Errorf("zklock: %w: the node %s is gone", dlock.ErrLeaseLost, l.Path)
		default:
			res[i].Validity = min(h.TTL, d.timeout) // counted by dlock from this tick's start, before sent
		}
	}
	return res
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
