package zklock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// seq returns the sequence number of a lock child (or of an election's
// candidate: see election.go), or -1.
func seq(child string) int64 {
	i, n := strings.LastIndex(child, "lock-"), len("lock-")
	if i < 0 {
		i, n = strings.LastIndex(child, latchInfix), len(latchInfix)
	}
	if i < 0 {
		return -1
	}
	// Base 10 explicitly: the sequence has leading zeros, which fmt.Sscan
	// would read as octal.
	n64, err := strconv.ParseInt(child[i+n:], 10, 64)
	if err != nil {
		return -1
	}
	return n64
}

func (d *zkDriver) Acquire(ctx context.Context, r driver.Request) (_ driver.Grant, err error) {
	defer func() { err = d.permErr(err, r.Name) }()
	if r.Kind != driver.Exclusive {
		return d.acquireKind(ctx, r) // kinds.go
	}
	path, err := d.lockPath(r.Name)
	if err != nil {
		return driver.Grant{}, err
	}
	// A session change ends an attempt (its node lives in a session the
	// driver no longer follows): a few more go in the new session.
	for retries := 0; ; retries++ {
		s := d.current()
		if s.isEnded() { // expired, and no new session yet
			err = fmt.Errorf("zklock: %w: no session (go-zookeeper is opening a new one)", errRetry)
		} else if err = d.vet(ctx, path); err == nil {
			a := &attempt{d: d, s: s, path: path, data: holderData(r.Owner, r.Label)}
			a.candidate(ctx)
			if a.guid, err = newGUID(); err != nil {
				return driver.Grant{}, err
			}
			var g driver.Grant
			g, err = a.run(ctx, r)
			if err == nil && g.Acquired {
				return g, nil
			}
			a.abandon() // every path that gives up deletes what it made
			if err == nil {
				return g, nil
			}
		}
		if err := d.retryAfter(ctx, r.Name, retries, err); err != nil {
			return driver.Grant{}, err
		}
	}
}

// retryAfter is what an acquire of name does after attempt number retries
// ended in err: nil to try again in the session now current, after a
// pause, or the error to give up with (err is not errRetry, the retries are
// spent, or ctx is done).
func (d *zkDriver) retryAfter(ctx context.Context, name string, retries int, err error) error {
	if !errors.Is(err, errRetry) || retries >= 5 || ctx.Err() != nil {
		return fmt.Errorf("zklock: acquire %q: %w", name, err)
	}
	if perr := d.pause(ctx, nil); perr != nil {
		return fmt.Errorf("zklock: acquire %q: %w", name, errors.Join(perr, err))
	}
	return nil
}

// run makes the attempt: it creates our node and waits (with r.Wait) until
// it is the first. Whatever it returns but a grant, the caller abandons
// the attempt.
func (a *attempt) run(ctx context.Context, r driver.Request) (driver.Grant, error) {
	d, s, path := a.d, a.s, a.path
	var (
		first children
		cz    int64
		err   error
	)
	if !d.noMulti.Load() && d.parentEmpty(path) {
		// One round trip: the create's transaction also tells whether our
		// node is alone, and its czxid.
		var parent *zk.Stat
		parent, err = a.create(ctx, true)
		if err == nil && parent != nil {
			cz = parent.Pzxid
			d.statTokens.Add(1)
			if parent.NumChildren == 1 {
				first.names = []string{a.node[strings.LastIndex(a.node, "/")+1:]}
			}
		}
	} else {
		first, cz, err = a.createAndRead(ctx)
	}
	if err != nil {
		return driver.Grant{}, err
	}
	node := a.node
	mine := node[strings.LastIndex(node, "/")+1:]
	// Unless the create proved it, the czxid (the token) is read while the
	// queue is: one round trip.
	var czxid *pending
	if cz == 0 {
		czxid = d.start(s, func() error {
			ok, st, err := d.conn.Exists(node)
			if err == nil && !ok {
				err = zk.ErrNoNode
			}
			if err == nil {
				cz = st.Czxid
			}
			return err
		})
	}
	grant := func() (driver.Grant, error) {
		if czxid != nil {
			if err := czxid.wait(ctx); err != nil {
				return driver.Grant{}, fmt.Errorf("zklock: stat %s: %w", node, err)
			}
			if !czxid.inSession {
				return driver.Grant{}, errSessionChanged
			}
		}
		// The hold lasts while the session does, and the server keeps the
		// session for its timeout after it last heard from it: the send
		// time of the last request answered in it, which is after our
		// create was sent.
		return driver.Grant{Acquired: true, Token: uint64(cz), Holds: 1, Since: s.lastHeard(),
			Validity: min(r.TTL, d.valid()), Lost: s.lost, Handle: &Lease{Path: node, Czxid: cz, sess: s}}, nil
	}
	for {
		var children []string
		if first.names != nil {
			children, first.names = first.names, nil
		} else {
			c := d.readChildren(ctx, s, path)
			children, err = c.names, c.err
			d.learnParent(path, c.stat)
			if err == nil && !c.inSession {
				return driver.Grant{}, errSessionChanged
			}
		}
		if transient(err) && r.Wait && ctx.Err() == nil {
			// Connection loss: the session (and our place) may survive it.
			if err := d.pause(ctx, s.lost); err != nil {
				return driver.Grant{}, err
			}
			continue
		}
		if err != nil {
			return driver.Grant{}, fmt.Errorf("zklock: children: %w", err)
		}
		i := slices.Index(children, mine)
		switch {
		case i < 0:
			return driver.Grant{}, fmt.Errorf("zklock: %w: our node %s vanished (session expired)", errRetry, node)
		case i == 0:
			return grant()
		case !r.Wait:
			return driver.Grant{}, nil
		}
		var (
			exists bool
			ch     <-chan zk.Event
		)
		prev := path + "/" + children[i-1] // only the one before ours
		p, err := d.call(ctx, s, func() (err error) { exists, _, ch, err = d.conn.ExistsW(prev); return err })
		if transient(err) {
			continue // read again, which pauses while the connection is down
		}
		if err != nil {
			return driver.Grant{}, fmt.Errorf("zklock: watch: %w", err)
		}
		if !p.inSession {
			return driver.Grant{}, errSessionChanged
		}
		// Sequence numbers only grow, so a node created after our read
		// comes after ours: if the one before ours was the first, its
		// deletion makes ours the first, with no need to read again.
		if !exists {
			if i == 1 {
				return grant()
			}
			continue
		}
		select {
		case ev := <-ch:
			if i == 1 && ev.Type == zk.EventNodeDeleted {
				return grant()
			}
		case <-ctx.Done():
			return driver.Grant{}, ctx.Err()
		case <-s.lost:
			return driver.Grant{}, fmt.Errorf("zklock: %w: the session may have expired while waiting", errRetry)
		}
	}
}

// errRetry marks failures after which a new attempt may succeed: the
// session changed or may have expired, and with it our node.
var errRetry = errors.New("try again")

// transient reports errors after which the connection (and the session)
// may come back: go-zookeeper's, and the network errors it passes on when
// writing a request fails.
func transient(err error) bool {
	var ne net.Error
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// pause waits a moment before retrying after connection loss; it fails
// when ctx ends or lost is closed (the session may be gone).
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

// lockPath maps a lock name to its node path, refusing names the server
// would refuse (with "invalid arguments") or that would put the lock on a
// node it reserves.
func (d *zkDriver) lockPath(name string) (string, error) {
	if err := validName(d.root, name); err != nil {
		return "", fmt.Errorf("zklock: %w: %q: %s", dlock.ErrInvalidName, name, err)
	}
	return d.root + "/" + name, nil
}

// CheckName implements driver.NameChecker, so a bad name is refused when the
// Mutex is made. Besides lockPath's rules, a name with a component after
// the first named as a semaphore's own nodes is refused: the mutex a
// Semaphore "s" takes is the node s/locks, its permits are children of
// s/leases, so a Mutex "s/locks" kept the semaphore from granting, and a
// Mutex "s/leases" counted as a permit and wiped the stored limit (an
// adversary pass: a semaphore over its limit). The backend's own requests
// for those nodes do not pass here.
func (d *zkDriver) CheckName(name string) error {
	if _, err := d.lockPath(name); err != nil {
		return err
	}
	if err := semaphoreNode(name); err != nil {
		return fmt.Errorf("zklock: %w: %q: %s", dlock.ErrInvalidName, name, err)
	}
	return nil
}

// semaphoreNode reports a component of path after its first that names a
// semaphore's own node (locksChild, leaseChild).
func semaphoreNode(path string) error {
	segs := strings.Split(path, "/")
	for _, seg := range segs[1:] {
		if seg == locksChild || seg == leaseChild {
			return fmt.Errorf("path component %q is a semaphore's own node (NAME/%s, NAME/%s)", seg, locksChild, leaseChild)
		}
	}
	return nil
}

// checkChroot refuses a chroot (a URL's path, "/a/b", or "" for none) that
// ZooKeeper would refuse, which Open took and every Lock then failed on
// ("zk: invalid path") until its ctx ended, or that would put this client's
// nodes where another client's locks count them: under ZooKeeper's own
// /zookeeper, or at a node named like a contender or a semaphore's own.
func checkChroot(chroot string) error {
	if chroot == "" {
		return nil
	}
	rel, ok := strings.CutPrefix(chroot, "/")
	if !ok {
		return fmt.Errorf("chroot %q: want an absolute path", chroot)
	}
	if strings.ContainsAny(chroot, "&=") {
		// zk://h/c&acl=… made the chroot "/c&acl=…", and the grant
		// named nobody without a word (a re-test pass). Not quoted: it
		// may hold a digest hash.
		return fmt.Errorf("the chroot holds '&' or '=': parameters follow a '?' (zk://host/chroot?acl=…)")
	}
	if err := validName("", rel); err != nil {
		return fmt.Errorf("chroot %q: %s", chroot, err)
	}
	if err := semaphoreNode(rel); err != nil {
		return fmt.Errorf("chroot %q: %s", chroot, err)
	}
	return nil
}

// validName reports why the path root/name is not one ZooKeeper accepts,
// or returns nil. The rules are those of ZooKeeper's PathUtils.validatePath,
// applied to the name's components (a leading "/" is dropped). The server
// checks characters as Java's UTF-16 units, so a rune above U+FFFF (such as
// an emoji), written as a surrogate pair, is refused too.
func validName(root, name string) error {
	if strings.HasPrefix(name, "/") {
		// "/a" and "a" would be one node, so one lock under two names.
		return fmt.Errorf(`a leading "/": names are paths under the chroot, write %q`, strings.TrimLeft(name, "/"))
	}
	segs := strings.Split(name, "/")
	for i, seg := range segs {
		switch {
		case seg == "":
			return fmt.Errorf("an empty path component")
		case seg == "." || seg == "..":
			return fmt.Errorf("a %q path component", seg)
		case i > 0 && (strings.HasPrefix(seg, "_c_") || seq(seg) >= 0 || strings.Contains(seg, readBase) || strings.Contains(seg, writeBase)):
			// A node named like a contender's would be counted as one by
			// the lock of the parent name: a phantom holder.
			return fmt.Errorf("path component %q is named like a contender node (_c_…, …lock-N, …latch-N, __READ__, __WRIT__)", seg)
		}
	}
	if root == "" && segs[0] == "zookeeper" {
		return fmt.Errorf("/zookeeper is ZooKeeper's own node")
	}
	if root != "" && segs[0] == chrootMarker {
		return fmt.Errorf("%s is dlock's own node in a chroot", chrootMarker)
	}
	for i, r := range name {
		if badRune(r) {
			return fmt.Errorf("character %U at byte %d is not allowed in a ZooKeeper path", r, i)
		}
	}
	return nil
}

// badRune reports the characters PathUtils.validatePath refuses.
func badRune(r rune) bool {
	return r <= 0x1f || r >= 0x7f && r <= 0x9f || r >= 0xd800 && r <= 0xf8ff || r >= 0xfff0
}

func (d *zkDriver) Release(ctx context.Context, h driver.Held, _ int) (err error) {
	defer func() { err = d.permErr(err, h.Name) }()
	l, ok := h.Handle.(*Lease)
	if !ok {
		return fmt.Errorf("zklock: release %q: %w", h.Name, dlock.ErrLeaseLost)
	}
	// The path carries this contender's GUID: no one else's node can have
	// it, so an unconditional delete only ever removes our own.
	p, err := d.call(ctx, nil, func() error { return d.conn.Delete(l.Path, -1) })
	switch {
	case errors.Is(err, errNoReply) || transient(err):
		// A lease dlock gave up as lost, or an Unlock with the connection
		// down: the node would hold the lock for the rest of the session.
		d.remove(l.Path, p)
		return fmt.Errorf("zklock: release %q: %w (deleting again once reconnected, until the node is gone)", h.Name, err)
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("zklock: release %q: %w: the node is gone", h.Name, dlock.ErrLeaseLost)
	case err != nil:
		return fmt.Errorf("zklock: release %q: %w", h.Name, err)
	}
	return nil
}

func (d *zkDriver) holder(ctx context.Context, name string) (string, *zk.Stat, []byte, int, error) {
	path, err := d.lockPath(name)
	if err != nil {
		return "", nil, nil, 0, err
	}
	c := d.readChildren(ctx, nil, path)
	children, err := c.names, c.err
	if errors.Is(err, zk.ErrNoNode) || (err == nil && len(children) == 0) {
		return "", nil, nil, 0, nil
	}
	if err != nil {
		return "", nil, nil, 0, err
	}
	node := path + "/" + children[0]
	var (
		data []byte
		stat *zk.Stat
	)
	_, err = d.call(ctx, nil, func() (err error) { data, stat, err = d.conn.Get(node); return err })
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil, nil, 0, nil
	}
	return node, stat, data, len(children) - 1, err
}

// holderData is the data of a contender's node: its owner id, a NUL, and its
// label (dlock forbids NUL in both). Curator keeps the client's address
// there and never reads it back, nor does zk.Lock.
func holderData(owner, label string) []byte { return []byte(owner + "\x00" + label) }

// parseHolderData splits a node's data into owner id and label. Data without
// a NUL (a Curator holder's address, an older dlock's owner id) is all owner.
func parseHolderData(data []byte) (owner, label string) {
	owner, label, _ = strings.Cut(string(data), "\x00")
	return owner, label
}

func (d *zkDriver) Inspect(ctx context.Context, name string) (_ driver.Info, err error) {
	defer func() { err = d.permErr(err, name) }()
	info := driver.Info{Name: name}
	node, stat, data, waiters, err := d.holder(ctx, name)
	if err != nil || node == "" {
		return info, err
	}
	info.Owner, info.Label = parseHolderData(data)
	info.Held, info.Holds, info.Token, info.Waiters = true, 1, uint64(stat.Czxid), waiters
	info.Notes = []string{"holder node " + node}
	return info, nil
}

// ForceRelease deletes the holder's node, whoever holds it (token 0), or
// only a holder's whose token (its node's czxid) is token: a node's name
// is never used again, so the delete reaches that holder only.
func (d *zkDriver) ForceRelease(ctx context.Context, name string, token uint64) (err error) {
	defer func() { err = d.permErr(err, name) }()
	node, stat, _, _, err := d.holder(ctx, name)
	if err != nil || node == "" || token != 0 && uint64(stat.Czxid) != token {
		return err
	}
	if _, err := d.call(ctx, nil, func() error { return d.conn.Delete(node, -1) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("zklock: force release %q: %w", name, err)
	}
	return nil
}
