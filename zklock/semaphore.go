package zklock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// encodeLimit is how a semaphore's permit count is kept in the data of its
// leases node: a 4-byte big-endian int, the encoding of Curator's
// SharedCount.
func encodeLimit(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

// decodeLimit reads a stored permit count; 0 if there is none.
func decodeLimit(b []byte) int {
	if len(b) != 4 {
		return 0
	}
	return int(int32(binary.BigEndian.Uint32(b)))
}

// tryMutexRounds bounds how often a try (no wait) at a permit retries the
// semaphore's mutex while it is busy and a permit looks free.
const tryMutexRounds = 50

// runPermit makes one attempt at a permit, as Curator's
// InterProcessSemaphoreV2 does: it takes the mutex <path>/locks (an
// InterProcessMutex), creates our node <path>/leases/_c_<guid>-lease-<seq>,
// and holds a permit once the leases node has no more children than the
// limit, waiting (with r.Wait) while it has more, watching the leases'
// children; then it releases the mutex. While it holds the mutex it also
// checks and stores the limit (see checkLimit).
//
// A try (no r.Wait) that finds the mutex taken looks at the leases: if
// they are full it gives up, else (the mutex holder is on its way to a
// permit) it tries the mutex again a moment later, a few times.
func (d *zkDriver) runPermit(ctx context.Context, r driver.Request, path string) (driver.Grant, error) {
	leases := path + "/" + leaseChild
	mreq := driver.Request{Name: r.Name + "/" + locksChild, Owner: r.Owner, Label: r.Label,
		TTL: r.TTL, Kind: driver.Exclusive, Wait: r.Wait}
	var mg driver.Grant
	for round := 0; ; round++ {
		var err error
		if mg, err = d.Acquire(ctx, mreq); err != nil {
			return driver.Grant{}, err
		}
		if mg.Acquired {
			break
		}
		names, _, _, err := d.rawChildren(ctx, nil, leases)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return driver.Grant{}, fmt.Errorf("zklock: children: %w", err)
		}
		if len(names) >= r.Limit || round >= tryMutexRounds {
			return driver.Grant{}, nil
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return driver.Grant{}, ctx.Err()
		}
	}
	ml := mg.Handle.(*Lease)
	g, given, err := d.takePermit(ctx, r, leases, ml)
	if !given {
		// The mutex is ours to give back whatever happens to ctx.
		rctx, cancel := context.WithTimeout(d.life, d.sessionTimeout())
		defer cancel()
		_ = d.Release(rctx, driver.Held{Name: mreq.Name, Handle: ml}, 1)
	}
	return g, err
}

// takePermit runs under the semaphore's mutex, whose node is ml: it checks
// the limit, creates our lease node, and waits for room. given reports that
// the mutex was given back, in the transaction of a create that held at
// once: the mutex is held for two round trips (a read, the create).
func (d *zkDriver) takePermit(ctx context.Context, r driver.Request, leases string, ml *Lease) (g driver.Grant, given bool, err error) {
	s := ml.sess
	a, err := d.newAttempt(ctx, leases, leaseBase, r)
	if err != nil {
		return driver.Grant{}, false, err
	}
	if a.s != s {
		return driver.Grant{}, false, errSessionChanged
	}
	live, err := d.checkLimit(ctx, s, leases, r)
	if err != nil {
		return driver.Grant{}, false, err
	}
	defer func() {
		if err != nil || !g.Acquired {
			a.abandon()
		}
	}()
	// The create's transaction also writes the limit to the leases node and
	// returns its stat: our czxid, and how many leases there are with ours.
	// Only holders of the mutex add leases, so with room now there is room
	// at the create: it gives the mutex back too.
	a.parentData = encodeLimit(r.Limit)
	if live < r.Limit {
		a.andDelete = ml.Path
	}
	parent, err := a.create(ctx, !d.noMulti.Load())
	if err != nil {
		return driver.Grant{}, false, err
	}
	given = parent != nil && a.andDelete != ""
	if given && int(parent.NumChildren) > r.Limit {
		// Someone added a lease without the mutex: we may not wait without
		// it (waiters past the limit would keep each other out); start again.
		return driver.Grant{}, true, fmt.Errorf("zklock: %w: %s has %d leases, over the limit %d", errRetry, leases, parent.NumChildren, r.Limit)
	}
	g, err = a.leaseWait(ctx, r, leases, parent)
	return g, given, err
}

// leaseWait waits, with r.Wait, until the leases node has no more children
// than the limit, our node among them. parent is the stat of the leases
// node returned by the create's transaction, if any.
func (a *attempt) leaseWait(ctx context.Context, r driver.Request, leases string, parent *zk.Stat) (driver.Grant, error) {
	d, s := a.d, a.s
	var (
		cz  int64
		err error
	)
	if parent != nil {
		cz = parent.Pzxid
		d.statTokens.Add(1)
		if int(parent.NumChildren) <= r.Limit {
			return a.grantOf(r, cz), nil
		}
		if !r.Wait {
			return driver.Grant{}, nil
		}
	} else if cz, err = a.czxidOf(ctx); err != nil {
		return driver.Grant{}, err
	}
	mine := a.node[strings.LastIndex(a.node, "/")+1:]
	for {
		var (
			names []string
			ch    <-chan zk.Event
		)
		p, err := d.call(ctx, s, func() (err error) { names, _, ch, err = d.conn.ChildrenW(leases); return err })
		if transient(err) && r.Wait && ctx.Err() == nil {
			if err := d.pause(ctx, s.lost); err != nil {
				return driver.Grant{}, err
			}
			continue
		}
		switch {
		case err != nil:
			return driver.Grant{}, fmt.Errorf("zklock: children: %w", err)
		case !p.inSession:
			return driver.Grant{}, errSessionChanged
		case !slices.Contains(names, mine):
			return driver.Grant{}, fmt.Errorf("zklock: %w: our node %s vanished (session expired)", errRetry, a.node)
		case len(names) <= r.Limit:
			return a.grantOf(r, cz), nil
		case !r.Wait:
			return driver.Grant{}, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return driver.Grant{}, ctx.Err()
		case <-s.lost:
			return driver.Grant{}, fmt.Errorf("zklock: %w: the session may have expired while waiting", errRetry)
		}
	}
}

// checkLimit compares r.Limit with the limit stored in the leases node,
// under the semaphore's mutex (so no other dlock client changes it
// meanwhile): a different stored limit while there are leases is an error
// wrapping ErrLimitMismatch. With no leases, or none stored (Curator's
// holders store none), the caller's limit replaces it. It returns how many
// leases there are.
func (d *zkDriver) checkLimit(ctx context.Context, s *session, leases string, r driver.Request) (int, error) {
	var (
		data  []byte
		names []string
	)
	get := d.start(s, func() (err error) { data, _, err = d.conn.Get(leases); return err })
	kids := d.start(s, func() (err error) { names, _, err = d.conn.Children(leases); return err })
	gerr, kerr := get.wait(ctx), kids.wait(ctx)
	if errors.Is(gerr, zk.ErrNoNode) || errors.Is(kerr, zk.ErrNoNode) {
		return 0, nil
	}
	if err := errors.Join(gerr, kerr); err != nil {
		return 0, fmt.Errorf("zklock: read %s: %w", leases, err)
	}
	if !get.inSession || !kids.inSession {
		return 0, errSessionChanged
	}
	if stored := decodeLimit(data); len(names) > 0 && stored != 0 && stored != r.Limit {
		return 0, fmt.Errorf("%w: %d permits asked for, %d held under a limit of %d", dlock.ErrLimitMismatch, r.Limit, len(names), stored)
	}
	return len(names), nil
}

// inspectPermits lists the semaphore's leases: the first ones, up to the
// stored limit, hold permits; the waiters are the contenders for its mutex
// (one of which may have a lease node past the limit, waiting for room).
func (d *zkDriver) inspectPermits(ctx context.Context, name string) (driver.Info, []string, error) {
	info := driver.Info{Name: name, Kind: driver.Permit}
	path, err := d.lockPath(name)
	if err != nil {
		return info, nil, err
	}
	leases := path + "/" + leaseChild
	var data []byte
	_, err = d.call(ctx, nil, func() (err error) { data, _, err = d.conn.Get(leases); return err })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return info, nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
	}
	info.Limit = decodeLimit(data)
	names, _, _, err := d.rawChildren(ctx, nil, leases)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return info, nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
	}
	slices.SortFunc(names, func(a, b string) int { return int(nodeSeq(a, leaseBase) - nodeSeq(b, leaseBase)) })
	if info.Limit > 0 && len(names) > info.Limit {
		names = names[:info.Limit]
	}
	var paths []string
	for _, n := range names {
		node := leases + "/" + n
		h, ok, err := d.holderOf(ctx, node, driver.Permit)
		if err != nil {
			return info, nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
		}
		if ok {
			info.Holders = append(info.Holders, h)
			paths = append(paths, node)
		}
	}
	locks, _, _, err := d.rawChildren(ctx, nil, path+"/"+locksChild)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return info, nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
	}
	info.Waiters = len(sortLockChildren(locks))
	summarize(&info)
	return info, paths, nil
}
