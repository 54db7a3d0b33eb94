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
	names     []string // lock children in sequence order
	stat      *zk.Stat // the parent's
	err       error
	inSession bool // answered in the session the read was made for
}

// readChildren reads the lock children of path, until ctx ends, as a
// request of session s (nil: of no particular session).
func (d *zkDriver) readChildren(ctx context.Context, s *session, path string) children {
	var (
		names []string
		st    *zk.Stat
	)
	p, err := d.call(ctx, s, func() (err error) { names, st, err = d.conn.Children(path); return err })
	if err != nil {
		return children{err: err}
	}
	return children{names: sortLockChildren(names), stat: st, inSession: p.inSession}
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
// order). It returns the second read if it saw the node, and the node's
// czxid if the reads prove it, else 0.
//
// The proof: the first read does not list our node, the second does, and
// the parent's cversion (its count of child changes) grew by exactly one
// between them. Then our create was the only change in between, so the
// parent's pzxid in the second read is our create's zxid: the czxid,
// without a read of its own. If the requests went out in another order, or
// another contender's create or delete came between them, the proof fails
// and the caller reads the czxid.
func (a *attempt) createAndRead(ctx context.Context) (children, int64, error) {
	d := a.d
	before := make(chan children, 1)
	done := make(chan error, 1)
	go func() { before <- d.readChildren(ctx, a.s, a.path) }()
	runtime.Gosched() // let it queue its request first
	go func() {
		_, err := a.create(ctx, false)
		done <- err
	}()
	runtime.Gosched()
	after := d.readChildren(ctx, a.s, a.path)
	err, b := <-done, <-before
	if err != nil {
		return children{}, 0, err
	}
	d.learnParent(a.path, after.stat)
	if i := after.index(a.guid); after.err != nil || !after.inSession || i < 0 || a.path+"/"+after.names[i] != a.node {
		return children{}, 0, nil // read again
	}
	var czxid int64
	if b.err == nil && b.inSession && b.index(a.guid) < 0 && after.stat.Cversion == b.stat.Cversion+1 {
		czxid = after.stat.Pzxid
		d.provedTokens.Add(1)
	}
	return after, czxid, nil
}
