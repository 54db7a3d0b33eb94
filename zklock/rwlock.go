package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dlock/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// rwChild is a child of a read-write lock's node: one of Curator's
// _c_<guid>-__READ__<seq> or _c_<guid>-__WRIT__<seq> nodes.
type rwChild struct {
	name  string
	seq   int64
	write bool
}

// rwChildren keeps the read-write lock's children of names, in sequence
// order. Curator sorts them by the text after __READ__ or __WRIT__ (ten
// digits), which is the same order; other children (a mutex's lock- nodes,
// a semaphore's locks and leases) sort after them in Curator and are no
// part of the read-write lock in either.
func rwChildren(names []string) []rwChild {
	out := make([]rwChild, 0, len(names))
	for _, n := range names {
		if s := nodeSeq(n, writeBase); s >= 0 {
			out = append(out, rwChild{name: n, seq: s, write: true})
		} else if s := nodeSeq(n, readBase); s >= 0 {
			out = append(out, rwChild{name: n, seq: s})
		}
	}
	slices.SortFunc(out, func(a, b rwChild) int { return int(a.seq - b.seq) })
	return out
}

// rwBlocker returns the child the one at i must wait for, or -1 if it
// holds: for a writer, the child just before it (Curator's WriteLock is a
// mutex over every child); for a reader, the last writer before it
// (Curator's ReadLock holds when no writer comes before it, so a queued
// writer keeps later readers out). Curator's reader watches the first
// writer before it instead; either way the reader looks again when the
// watched node goes, and the last one goes last.
func rwBlocker(cs []rwChild, i int) int {
	if cs[i].write {
		return i - 1
	}
	for j := i - 1; j >= 0; j-- {
		if cs[j].write {
			return j
		}
	}
	return -1
}

// runRW makes one attempt at a read (Shared) or write hold: it creates our
// __READ__ or __WRIT__ node under the lock's node and, with r.Wait, waits
// watching only the node it must wait for. Whatever it returns but a
// grant, it has abandoned the attempt.
func (d *zkDriver) runRW(ctx context.Context, r driver.Request, path string) (g driver.Grant, err error) {
	base := readBase
	if r.Kind == driver.Write {
		base = writeBase
	}
	a, err := d.newAttempt(ctx, path, base, r)
	if err != nil {
		return driver.Grant{}, err
	}
	defer func() {
		if err != nil || !g.Acquired {
			a.abandon()
		}
	}()
	// With the parent known empty, the create's transaction returns the
	// parent's stat: its pzxid is our node's czxid.
	parent, err := a.create(ctx, !d.noMulti.Load() && d.parentEmpty(path))
	if err != nil {
		return driver.Grant{}, err
	}
	var cz int64
	if parent != nil {
		cz = parent.Pzxid
		d.statTokens.Add(1)
	} else if cz, err = a.czxidOf(ctx); err != nil {
		return driver.Grant{}, err
	}
	mine := a.node[strings.LastIndex(a.node, "/")+1:]
	for {
		names, st, inSession, err := d.rawChildren(ctx, a.s, path)
		if transient(err) && r.Wait && ctx.Err() == nil {
			if err := d.pause(ctx, a.s.lost); err != nil {
				return driver.Grant{}, err
			}
			continue
		}
		if err != nil {
			return driver.Grant{}, fmt.Errorf("zklock: children: %w", err)
		}
		if !inSession {
			return driver.Grant{}, errSessionChanged
		}
		d.learnParent(path, st)
		cs := rwChildren(names)
		i := slices.IndexFunc(cs, func(c rwChild) bool { return c.name == mine })
		if i < 0 {
			return driver.Grant{}, fmt.Errorf("zklock: %w: our node %s vanished (session expired)", errRetry, a.node)
		}
		b := rwBlocker(cs, i)
		switch {
		case b < 0:
			return a.grantOf(r, cz), nil
		case !r.Wait:
			return driver.Grant{}, nil
		}
		if err := a.waitGone(ctx, path+"/"+cs[b].name); err != nil {
			return driver.Grant{}, err
		}
	}
}

// inspectRW lists the read-write lock's holders: the readers before the
// first writer, or the first writer; the other nodes are waiters.
func (d *zkDriver) inspectRW(ctx context.Context, name string) (driver.Info, []string, error) {
	info := driver.Info{Name: name, Kind: driver.Shared}
	path, err := d.lockPath(name)
	if err != nil {
		return info, nil, err
	}
	names, _, _, err := d.rawChildren(ctx, nil, path)
	if errors.Is(err, zk.ErrNoNode) {
		return info, nil, nil
	}
	if err != nil {
		return info, nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
	}
	var paths []string
	cs := rwChildren(names)
	for i, c := range cs {
		if rwBlocker(cs, i) >= 0 {
			info.Waiters++
			continue
		}
		kind := driver.Shared
		if c.write {
			kind = driver.Write
		}
		node := path + "/" + c.name
		h, ok, err := d.holderOf(ctx, node, kind)
		if err != nil {
			return info, nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
		}
		if ok {
			info.Holders = append(info.Holders, h)
			paths = append(paths, node)
		}
	}
	summarize(&info)
	if info.Held && info.Holders[0].Kind == driver.Write {
		info.Kind = driver.Write
	}
	return info, paths, nil
}
