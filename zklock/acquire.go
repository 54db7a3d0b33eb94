package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/go-zookeeper/zk"
)

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

func (d *zkDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Kind != driver.Exclusive {
		return driver.Grant{}, dlock.ErrUnsupported
	}
	path, err := d.lockPath(r.Name)
	if err != nil {
		return driver.Grant{}, err
	}
	lost := d.session() // before the create: a node is never older than its session
	guid, err := newGUID()
	if err != nil {
		return driver.Grant{}, err
	}
	var (
		node  string
		first children
		cz    int64
	)
	if !d.noMulti.Load() && d.parentEmpty(path) {
		// One round trip: the create's transaction also tells whether our
		// node is alone, and its czxid.
		var parent *zk.Stat
		node, parent, err = d.create(ctx, path, guid, r.Owner, true)
		if err == nil && parent != nil {
			cz = parent.Pzxid
			d.statTokens.Add(1)
			if parent.NumChildren == 1 {
				first.names = []string{node[strings.LastIndex(node, "/")+1:]}
			}
		}
	} else {
		node, first, cz, err = d.createAndRead(ctx, path, guid, r.Owner)
	}
	if err != nil {
		return driver.Grant{}, err
	}
	mine := node[strings.LastIndex(node, "/")+1:]
	// Unless the create proved it, the czxid (the token) is read while the
	// queue is: one round trip.
	type stat struct {
		czxid int64
		err   error
	}
	czxid := make(chan stat, 1)
	if cz > 0 {
		czxid <- stat{czxid: cz}
	} else {
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
	}
	token := func() (int64, error) {
		st := <-czxid
		czxid <- st
		return st.czxid, st.err
	}
	sent := time.Now()
	grant := func() (driver.Grant, error) {
		cz, err := token()
		if err != nil {
			d.remove(node)
			return driver.Grant{}, fmt.Errorf("zklock: stat %s: %w", node, err)
		}
		return driver.Grant{Acquired: true, Token: uint64(cz), Holds: 1, Since: sent,
			Validity: min(r.TTL, d.timeout), Lost: lost, Handle: &Lease{Path: node, Czxid: cz}}, nil
	}
	for {
		var children []string
		if first.names != nil {
			children, first.names = first.names, nil
		} else {
			c := d.readChildren(path)
			children, err = c.names, c.err
			d.learnParent(path, c.stat)
		}
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
			return grant()
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
		// Sequence numbers only grow, so a node created after our read
		// comes after ours: if the one before ours was the first, its
		// deletion makes ours the first, with no need to read again.
		if !exists {
			sent = time.Now()
			if i == 1 {
				return grant()
			}
			continue
		}
		select {
		case ev := <-ch:
			sent = time.Now()
			if i == 1 && ev.Type == zk.EventNodeDeleted {
				return grant()
			}
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
