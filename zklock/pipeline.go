package zklock

import (
	"context"
	"runtime"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
)

// children is the answer to one read of a lock's children.
type children struct {
	names []string // lock children in sequence order
	stat  *zk.Stat // the parent's
	err   error
}

func (d *zkDriver) readChildren(path string) children {
	names, st, err := d.conn.Children(path)
	if err != nil {
		return children{err: err}
	}
	return children{names: sortLockChildren(names), stat: st}
}

// sortLockChildren keeps the lock children and orders them by sequence.
func sortLockChildren(names []string) []string {
	out := names[:0]
	for _, c := range names {
		if seq(c) >= 0 {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return int(seq(a) - seq(b)) })
	return out
}

// index returns the position of the child whose name carries guid, or -1.
func (c children) index(guid string) int {
	return slices.IndexFunc(c.names, func(n string) bool { return strings.HasPrefix(n, "_c_"+guid+"-") })
}

// createAndRead creates our node and reads the children in the same round
// trip: it sends a read of the children, the create, and a second read
// without waiting between them (ZooKeeper answers one session's requests in
// order). It returns our node, the second read if it saw the node, and the
// node's czxid if the reads prove it, else 0.
//
// The proof: the first read does not list our node, the second does, and
// the parent's cversion (its count of child changes) grew by exactly one
// between them. Then our create was the only change in between, so the
// parent's pzxid in the second read is our create's zxid: the czxid,
// without a read of its own. If the requests went out in another order, or
// another contender's create or delete came between them, the proof fails
// and the caller reads the czxid.
func (d *zkDriver) createAndRead(ctx context.Context, path, guid, owner string) (string, children, int64, error) {
	before := make(chan children, 1)
	type created struct {
		node string
		err  error
	}
	done := make(chan created, 1)
	go func() { before <- d.readChildren(path) }()
	runtime.Gosched() // let it queue its request first
	go func() {
		node, _, err := d.create(ctx, path, guid, owner, false)
		done <- created{node, err}
	}()
	runtime.Gosched()
	a := d.readChildren(path)
	c, b := <-done, <-before
	if c.err != nil {
		return "", children{}, 0, c.err
	}
	d.learnParent(path, a.stat)
	if i := a.index(guid); a.err != nil || i < 0 || path+"/"+a.names[i] != c.node {
		return c.node, children{}, 0, nil // read again
	}
	var czxid int64
	if b.err == nil && b.index(guid) < 0 && a.stat.Cversion == b.stat.Cversion+1 {
		czxid = a.stat.Pzxid
		d.provedTokens.Add(1)
	}
	return c.node, a, czxid, nil
}
