package zklock

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// attempt is one try at a lock: one contender node, named with one GUID,
// created in one session. An attempt that gives up deletes its node
// (abandon), whatever session the node ended up in.
type attempt struct {
	// For the semaphore (semaphore.go): parentData, if not nil, is written
	// to the lock's node in the create's transaction instead of empty data
	// (the stored permit count); andDelete, if set, is a node deleted in
	// that transaction (the semaphore's mutex, given back).
	parentData []byte
	andDelete  string

	d    *zkDriver
	s    *session // the session the attempt runs in
	path string   // the lock's node
	guid string
	data []byte // the node's data: holderData(owner, label), or a candidate's value
	// kind is the lock name in the node's name, after the GUID: "lock-"
	// (Curator's InterProcessMutex) when empty; "__READ__", "__WRIT__" or
	// "lease-" for the read-write lock and semaphore; "latch-" for an
	// election's candidate (election.go).
	kind string
	node string   // our node, once known
	sent *pending // the last create sent, nil before any
}

// parentBytes is the data the create's transaction writes to the lock's
// node: parentData, or none.
func (a *attempt) parentBytes() []byte {
	if a.parentData == nil {
		return []byte{}
	}
	return a.parentData
}

// errSessionChanged: a request of the attempt was answered in another
// session than the attempt's, or the attempt's session ended.
var errSessionChanged = fmt.Errorf("%w: the session changed", errRetry)

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
//
// A create answered in another session than the attempt's (go-zookeeper
// sent it after opening a new session) fails with errSessionChanged: the
// node is in a session the attempt does not follow, and abandon deletes it.
func (a *attempt) create(ctx context.Context, empty bool) (*zk.Stat, error) {
	d := a.d
	prefix := a.path + "/_c_" + a.guid + "-" + cmp.Or(a.kind, "lock-")
	for try := 0; ; try++ {
		var (
			node   string
			parent *zk.Stat
		)
		multi := empty && !d.noMulti.Load()
		p, err := d.call(ctx, a.s, func() error {
			if !multi {
				var err error
				node, err = d.conn.Create(prefix, a.data, zk.FlagEphemeral|zk.FlagSequence, d.acl)
				return err
			}
			ops := []any{&zk.CreateRequest{Path: prefix, Data: a.data, Acl: d.acl, Flags: zk.FlagEphemeral | zk.FlagSequence},
				&zk.SetDataRequest{Path: a.path, Data: a.parentBytes(), Version: -1}}
			if a.andDelete != "" {
				ops = append(ops, &zk.DeleteRequest{Path: a.andDelete, Version: -1})
			}
			res, err := d.conn.Multi(ops...)
			if err == nil && (len(res) != len(ops) || res[1].Stat == nil) {
				err = fmt.Errorf("zklock: create: unexpected multi reply %v", res)
			}
			if err == nil {
				node, parent = res[0].String, res[1].Stat
			}
			return err
		})
		a.sent = p
		if errors.Is(err, errNoReply) {
			return nil, err // abandon finds the node by GUID once the create is settled
		}
		switch {
		case err == nil && !p.inSession:
			a.node = node
			return nil, errSessionChanged
		case err == nil:
			a.node = node
			return parent, nil
		case multi && errors.Is(err, zk.ErrNoAuth): // may create children, not write the parent
			d.noMulti.Store(true)
			continue
		case errors.Is(err, zk.ErrNoNode) && try < 5:
			// The first lock of a name, or the server reaped an empty parent.
			if err := d.ensure(ctx, a.s, a.path); err != nil && !transient(err) {
				return nil, fmt.Errorf("zklock: create %s: %w", a.path, err)
			}
			continue
		case errors.Is(err, zk.ErrSessionExpired):
			// Sent in a session that expired: the node, if made, went with
			// it. The next attempt runs in the new session.
			return nil, fmt.Errorf("zklock: create: %w", errSessionChanged)
		case !transient(err):
			return nil, fmt.Errorf("zklock: create: %w", err)
		}
		// The create may have happened: look for it before trying again.
		for {
			node, ferr := a.findGUID(ctx)
			if node != "" && ferr == nil {
				a.node = node
				return nil, nil
			}
			if ferr == nil {
				break
			}
			if !transient(ferr) {
				return nil, fmt.Errorf("zklock: create: %w", ferr)
			}
			if perr := d.pause(ctx, a.s.lost); perr != nil {
				return nil, errors.Join(perr, err)
			}
		}
		if try >= 100 {
			return nil, fmt.Errorf("zklock: create: %w", err)
		}
	}
}

// findGUID returns our child of the lock's node, if it has one. A child
// found by a read answered in another session is reported as
// errSessionChanged, with the node, so that abandon deletes it.
func (a *attempt) findGUID(ctx context.Context) (string, error) {
	node, inSession, err := a.d.guidChild(ctx, a.s, a.path, a.guid)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if node != "" && !inSession {
		a.node = node
		return node, errSessionChanged
	}
	return node, nil
}

// guidChild returns the child of path whose name carries guid, or "", from
// a read of every child: a mutex's lock- nodes, a read-write lock's and a
// semaphore's nodes alike (readChildren keeps the lock- nodes only).
func (d *zkDriver) guidChild(ctx context.Context, s *session, path, guid string) (node string, inSession bool, err error) {
	names, _, inSession, err := d.rawChildren(ctx, s, path)
	if err != nil {
		return "", false, err
	}
	return children{names: names}.find(path, guid), inSession, nil
}

// find returns the child of path whose name carries guid, or "".
func (c children) find(path, guid string) string {
	if i := c.index(guid); i >= 0 {
		return path + "/" + c.names[i]
	}
	return ""
}

// abandonWait bounds how long a giving-up attempt waits for its node's
// deletion before it returns and leaves the rest to the background.
const abandonWait = 200 * time.Millisecond

// abandon deletes the node of an attempt that gives up: the node if known,
// else the child carrying the attempt's GUID, once the last create sent is
// settled (answered or failed: a create still queued in go-zookeeper could
// be sent later, even in a new session). It tries again in the background
// until ZooKeeper says the node is gone or the driver closes: a node left
// behind would hold the lock for the rest of its session. It waits a
// moment for the deletion, so that the caller's next attempt does not
// queue behind its own node.
func (a *attempt) abandon() {
	if a.sent == nil {
		return // nothing was sent
	}
	d, sent, node, path, guid := a.d, a.sent, a.node, a.path, a.guid
	done := make(chan struct{})
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		defer close(done)
		select {
		case <-sent.done:
		case <-d.life.Done():
			return
		}
		for {
			if d.deleteOurs(path, guid, node) {
				return
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-d.life.Done():
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(abandonWait):
	}
}

// deleteOurs deletes node, or if it is not known, the child of path
// carrying guid. It reports whether that is settled: the node is gone, or
// the server refused for good.
func (d *zkDriver) deleteOurs(path, guid, node string) bool {
	ctx, cancel := context.WithTimeout(d.life, d.sessionTimeout())
	defer cancel()
	if node == "" {
		found, _, err := d.guidChild(ctx, nil, path, guid)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return true
		case err != nil:
			return !retryable(err)
		}
		if node = found; node == "" {
			return true
		}
	}
	_, err := d.call(ctx, nil, func() error { return d.conn.Delete(node, -1) })
	return !retryable(err)
}

// retryable reports errors after which a deletion is tried again.
func retryable(err error) bool { return transient(err) || errors.Is(err, errNoReply) }

// remove deletes a node of ours in the background once del, the deletion
// that failed or was given up, is settled: until ZooKeeper says the node is
// gone or the driver closes.
func (d *zkDriver) remove(node string, del *pending) {
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		select {
		case <-del.done:
		case <-d.life.Done():
			return
		}
		for !d.deleteOurs("", "", node) {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-d.life.Done():
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

// maxKnownParents bounds the lock paths a driver remembers as empty.
const maxKnownParents = 10000

// parentEmpty reports whether the node of the lock at path is known to
// hold no data, so that create may write it (with the same empty data) in
// the transaction that creates our node.
func (d *zkDriver) parentEmpty(path string) bool {
	d.parentsMu.Lock()
	defer d.parentsMu.Unlock()
	return d.emptyParents[path]
}

// learnParent records what a read of the lock's children said about the
// lock's node: whether it holds data. A node that does hold data (someone
// else's) is never written.
func (d *zkDriver) learnParent(path string, st *zk.Stat) {
	if st == nil {
		return
	}
	d.parentsMu.Lock()
	defer d.parentsMu.Unlock()
	switch {
	case st.DataLength != 0:
		delete(d.emptyParents, path)
	case d.emptyParents == nil || len(d.emptyParents) >= maxKnownParents:
		d.emptyParents = map[string]bool{path: true}
	default:
		d.emptyParents[path] = true
	}
}
