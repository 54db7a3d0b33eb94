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
	timeout time.Duration

	mu      sync.Mutex
	lost    chan struct{} // closed when the current session expires
	done    chan struct{} // closed when the event watcher ends
	closing chan struct{} // closed by Close
	bg      sync.WaitGroup

	parentsMu    sync.Mutex
	emptyParents map[string]bool // lock paths whose node is known to hold no data
	noMulti      atomic.Bool     // the parent write was refused (ACL): create alone

	provedTokens atomic.Int64 // tokens createAndRead proved without a read
	statTokens   atomic.Int64 // tokens taken from a create's parent stat
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
	c := d.readChildren(path)
	children, err := c.names, c.err
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
