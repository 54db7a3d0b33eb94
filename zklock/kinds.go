package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Node names of the read-write lock and semaphore: Curator's.
const (
	readBase   = "__READ__" // InterProcessReadWriteLock's read nodes
	writeBase  = "__WRIT__" // and write nodes
	locksChild = "locks"    // InterProcessSemaphoreV2's mutex, an InterProcessMutex
	leaseChild = "leases"   // and its lease nodes' parent
	leaseBase  = "lease-"
)

// acquireKind takes a read or write hold of a read-write lock, or a permit
// of a semaphore. As for the mutex, an attempt belongs to one session: one
// that gives up (the session changed or may have expired) deletes what it
// made, and a few more go in the new session.
func (d *zkDriver) acquireKind(ctx context.Context, r driver.Request) (driver.Grant, error) {
	var run func(context.Context, driver.Request, string) (driver.Grant, error)
	switch r.Kind {
	case driver.Shared, driver.Write:
		run = d.runRW
	case driver.Permit:
		if r.Limit < 1 {
			return driver.Grant{}, fmt.Errorf("zklock: acquire %q: %w: a semaphore needs at least 1 permit, not %d", r.Name, dlock.ErrInvalidConfig, r.Limit)
		}
		run = d.runPermit
	default:
		return driver.Grant{}, fmt.Errorf("zklock: acquire %q: %w: kind %v", r.Name, dlock.ErrUnsupported, r.Kind)
	}
	path, err := d.lockPath(r.Name)
	if err != nil {
		return driver.Grant{}, err
	}
	for retries := 0; ; retries++ {
		var g driver.Grant
		g, err = run(ctx, r, path)
		if err == nil {
			return g, nil
		}
		if err := d.retryAfter(ctx, r.Name, retries, err); err != nil {
			return driver.Grant{}, err
		}
	}
}

// newAttempt starts an attempt at a node named base under path in the
// current session, or fails with errRetry while there is none, or as vet
// does.
func (d *zkDriver) newAttempt(ctx context.Context, path, base string, r driver.Request) (*attempt, error) {
	s := d.current()
	if s.isEnded() {
		return nil, fmt.Errorf("zklock: %w: no session (go-zookeeper is opening a new one)", errRetry)
	}
	if err := d.vet(ctx, path); err != nil {
		return nil, err
	}
	a := &attempt{d: d, s: s, path: path, kind: base, data: holderData(r.Owner, r.Label)}
	var err error
	if a.guid, err = newGUID(); err != nil {
		return nil, err
	}
	return a, nil
}

// grantOf is the grant of the attempt's node, whose czxid (the token) is cz.
// The hold lasts while the session does, as a mutex hold.
func (a *attempt) grantOf(r driver.Request, cz int64) driver.Grant {
	s := a.s
	return driver.Grant{Acquired: true, Token: uint64(cz), Holds: 1, Since: s.lastHeard(),
		Validity: min(r.TTL, a.d.valid()), Lost: s.lost, Handle: &Lease{Path: a.node, Czxid: cz, sess: s}}
}

// czxidOf reads the czxid of the attempt's node, for a create whose
// transaction did not return the parent's stat.
func (a *attempt) czxidOf(ctx context.Context) (int64, error) {
	var (
		ok bool
		st *zk.Stat
	)
	p, err := a.d.call(ctx, a.s, func() (err error) { ok, st, err = a.d.conn.Exists(a.node); return err })
	switch {
	case err != nil:
		return 0, fmt.Errorf("zklock: stat %s: %w", a.node, err)
	case !p.inSession:
		return 0, errSessionChanged
	case !ok:
		return 0, fmt.Errorf("zklock: %w: our node %s vanished (session expired)", errRetry, a.node)
	}
	return st.Czxid, nil
}

// rawChildren reads the children of path, in no order, as a request of s.
func (d *zkDriver) rawChildren(ctx context.Context, s *session, path string) ([]string, *zk.Stat, bool, error) {
	var (
		names []string
		st    *zk.Stat
	)
	p, err := d.call(ctx, s, func() (err error) { names, st, err = d.conn.Children(path); return err })
	if err != nil {
		return nil, nil, false, err
	}
	return names, st, p.inSession, nil
}

// waitGone waits until node is deleted (or found gone), ctx ends or the
// session may be lost. It returns nil when the caller should look again.
func (a *attempt) waitGone(ctx context.Context, node string) error {
	d, s := a.d, a.s
	var (
		exists bool
		ch     <-chan zk.Event
	)
	p, err := d.call(ctx, s, func() (err error) { exists, _, ch, err = d.conn.ExistsW(node); return err })
	if transient(err) {
		return d.pause(ctx, s.lost) // the connection is down: the session may survive it
	}
	if err != nil {
		return fmt.Errorf("zklock: watch: %w", err)
	}
	if !p.inSession {
		return errSessionChanged
	}
	if !exists {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.lost:
		return fmt.Errorf("zklock: %w: the session may have expired while waiting", errRetry)
	}
}

// nodeSeq returns the sequence of a child named …<base><10 digits>, or -1.
func nodeSeq(child, base string) int64 {
	i := strings.LastIndex(child, base)
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseInt(child[i+len(base):], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// InspectKind implements driver.KindInspector: the holders and waiters of
// the read-write lock (Shared or Write) or semaphore (Permit) named name.
func (d *zkDriver) InspectKind(ctx context.Context, name string, kind driver.Kind) (driver.Info, error) {
	info, _, err := d.readKind(ctx, name, kind)
	return info, err
}

// readKind describes the read-write lock or semaphore named name and
// returns the nodes of its live holds.
func (d *zkDriver) readKind(ctx context.Context, name string, kind driver.Kind) (driver.Info, []string, error) {
	switch kind {
	case driver.Shared, driver.Write:
		return d.inspectRW(ctx, name)
	case driver.Permit:
		return d.inspectPermits(ctx, name)
	}
	return driver.Info{}, nil, fmt.Errorf("zklock: inspect %q: %w: kind %v", name, dlock.ErrUnsupported, kind)
}

// ForceReleaseKind implements driver.KindForceReleaser: it deletes the
// nodes of the read-write lock's or semaphore's live holds. The waiters'
// nodes stay, and each holds in its turn as after releases: a reader or
// writer sees the node it watches go, and the waiter under the semaphore's
// mutex sees the leases fall within the limit.
func (d *zkDriver) ForceReleaseKind(ctx context.Context, name string, kind driver.Kind, tokens []uint64) (err error) {
	defer func() { err = d.permErr(err, name) }()
	info, nodes, err := d.readKind(ctx, name, kind)
	if err != nil {
		return err
	}
	for i, node := range nodes {
		if len(tokens) > 0 && !slices.Contains(tokens, info.Holders[i].Token) {
			continue
		}
		if _, err := d.call(ctx, nil, func() error { return d.conn.Delete(node, -1) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("zklock: force release %q: %w", name, err)
		}
	}
	return nil
}

// holderOf reads a node's data and czxid, as a Holder of kind; ok is false
// if the node is gone.
func (d *zkDriver) holderOf(ctx context.Context, node string, kind driver.Kind) (driver.Holder, bool, error) {
	var (
		data []byte
		st   *zk.Stat
	)
	_, err := d.call(ctx, nil, func() (err error) { data, st, err = d.conn.Get(node); return err })
	if errors.Is(err, zk.ErrNoNode) {
		return driver.Holder{}, false, nil
	}
	if err != nil {
		return driver.Holder{}, false, err
	}
	h := driver.Holder{Kind: kind, Token: uint64(st.Czxid), Holds: 1}
	h.Owner, h.Label = parseHolderData(data)
	return h, true, nil
}

// summarize fills info's top-level holder fields from its Holders: the
// write hold if there is one, else the one with the greatest token.
func summarize(info *driver.Info) {
	if len(info.Holders) == 0 {
		return
	}
	best := info.Holders[0]
	for _, h := range info.Holders[1:] {
		if best.Kind != driver.Write && (h.Kind == driver.Write || h.Token > best.Token) {
			best = h
		}
	}
	info.Held, info.Owner, info.Label, info.Holds, info.Token, info.TTL = true, best.Owner, best.Label, best.Holds, best.Token, best.TTL
}

var _ driver.KindForceReleaser = (*zkDriver)(nil)
