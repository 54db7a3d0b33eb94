package zklock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// create makes our contender node, protected as Curator does: its name
// carries a fresh GUID, so when a reply is lost with the connection, the
// node is found by GUID instead of created twice (which would leave an
// orphan that holds the lock for the rest of the session).
//
// With empty set (the parent is known to hold no data), the create goes in
// one transaction with a write of the same empty data to the parent, whose
// reply is the parent's stat just after our create: how many children it
// has, and its pzxid, which is our node's czxid. It returns that stat, or
// nil if the node was made some other way.
func (d *zkDriver) create(ctx context.Context, path, guid, owner string, empty bool) (string, *zk.Stat, error) {
	prefix := path + "/_c_" + guid + "-lock-"
	for attempt := 0; ; attempt++ {
		var (
			node   string
			parent *zk.Stat
			err    error
		)
		if empty && !d.noMulti.Load() {
			var res []zk.MultiResponse
			res, err = d.conn.Multi(
				&zk.CreateRequest{Path: prefix, Data: []byte(owner), Acl: d.acl, Flags: zk.FlagEphemeral | zk.FlagSequence},
				&zk.SetDataRequest{Path: path, Data: []byte{}, Version: -1})
			if err == nil && (len(res) != 2 || res[1].Stat == nil) {
				err = fmt.Errorf("zklock: create: unexpected multi reply %v", res)
			}
			if err == nil {
				node, parent = res[0].String, res[1].Stat
			}
			if errors.Is(err, zk.ErrNoAuth) { // may create children, not write the parent
				d.noMulti.Store(true)
				continue
			}
		} else {
			node, err = d.conn.Create(prefix, []byte(owner), zk.FlagEphemeral|zk.FlagSequence, d.acl)
		}
		switch {
		case err == nil:
			return node, parent, nil
		case errors.Is(err, zk.ErrNoNode) && attempt < 5:
			// The first lock of a name, or the server reaped an empty parent.
			if err := d.ensure(path); err != nil && !transient(err) {
				return "", nil, fmt.Errorf("zklock: create %s: %w", path, err)
			}
			continue
		case errors.Is(err, zk.ErrSessionExpired):
			continue // the node went with the session, if it was made
		case !transient(err):
			return "", nil, fmt.Errorf("zklock: create: %w", err)
		}
		// The create may have happened: look for it before trying again.
		for {
			node, ferr := d.findGUID(path, guid)
			if node != "" {
				return node, nil, nil
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
			return "", nil, fmt.Errorf("zklock: create: %w", errors.Join(ctx.Err(), err))
		}
	}
}

// findGUID returns the child of path whose name carries guid, if any.
func (d *zkDriver) findGUID(path, guid string) (string, error) {
	c := d.readChildren(path)
	if errors.Is(c.err, zk.ErrNoNode) {
		return "", nil
	}
	if c.err != nil {
		return "", c.err
	}
	if i := c.index(guid); i >= 0 {
		return path + "/" + c.names[i], nil
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
