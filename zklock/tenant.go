package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dlock/dlock"
	"github.com/go-zookeeper/zk"
)

// chrootMarker is the persistent node dlock keeps in a chroot, so that the
// chroot is never empty: an empty one was a container node the server
// removed (and ZooKeeper's "/" lets anyone delete an empty child), and
// another tenant then made it again, open to all, and reached this
// tenant's locks (an adversary pass). No lock can be named so.
const chrootMarker = "dlock-chroot"

// The rights that let another identity reach this client's locks through
// a node: at the chroot, read (list its names), create (make a lock's node
// open to all), delete and re-ACL; at a lock's node, write too (a
// semaphore's stored limit is its data).
const (
	chrootRights = zk.PermCreate | zk.PermDelete | zk.PermAdmin | zk.PermRead
	nodeRights   = chrootRights | zk.PermWrite
)

// claimChroot makes the chroot, and its parents, if missing, with the
// client's ACL, and keeps chrootMarker in it; then it refuses a chroot
// that another identity could reach this client's locks through.
// ZooKeeper does not say who made a node: the chroot's ACL is all there is
// to judge by (an adversary pass squatted chroots in many shapes).
//
//   - A client that may create there (a tenant, or the superuser) refuses
//     the chroot as foreign says.
//   - A client that may not create there (an operator with rd, or a tenant
//     in another's chroot) refuses it if anyone at all, or an address
//     range, may re-ACL it: its requests would be refused now, and pass
//     once that ACL is changed.
//
// Without a chroot, or with an ACL open to all (no identity in the URL),
// there are no tenants apart to keep.
func (d *zkDriver) claimChroot(ctx context.Context) error {
	if !d.tenant() {
		return nil
	}
	s := d.current()
	if err := d.ensure(ctx, s, d.root); err != nil {
		return chrootErr(d.root, err)
	}
	_, err := d.call(ctx, s, func() error { _, err := d.conn.Create(d.root+"/"+chrootMarker, nil, 0, d.acl); return err })
	creator := true
	switch {
	case errors.Is(err, zk.ErrNoAuth):
		creator = false
	case err != nil && !errors.Is(err, zk.ErrNodeExists):
		return chrootErr(d.root, err)
	}
	var acl []zk.ACL
	if _, err := d.call(ctx, s, func() (err error) { acl, _, err = d.conn.GetACL(d.root); return err }); errors.Is(err, zk.ErrNoAuth) {
		if !creator {
			return nil // nor may it read there: each of its requests is refused, and says so
		}
		return fmt.Errorf("zklock: %w: this identity may make nodes in the chroot %s but not read its ACL: "+
			"dlock cannot tell whether another tenant may reach its locks there; grant it r", dlock.ErrInvalidConfig, d.root)
	} else if err != nil {
		return fmt.Errorf("zklock: chroot %s: %w", d.root, err)
	}
	if !creator {
		if why := userTwice(acl); why != "" {
			return d.foreignErr("chroot", d.root, why)
		}
		for _, e := range acl {
			if e.Perms&zk.PermAdmin != 0 && manyIDs(e) {
				return d.foreignErr("chroot", d.root, fmt.Sprintf("lets %s re-ACL it", entryText(e)))
			}
		}
		return nil
	}
	why, named := d.foreign(acl, chrootRights)
	if why != "" {
		return d.foreignErr("chroot", d.root, why)
	}
	if named {
		d.markVetted(d.root)
	}
	return nil
}

// tenant reports whether this client has a chroot and an identity of its
// own to keep apart: without a chroot, or with an ACL open to all (no
// identity in the URL), there are no tenants.
func (d *zkDriver) tenant() bool { return d.root != "" && !openACL(d.acl) }

// foreign says how another identity could reach this client's locks
// through a node with the given ACL, which this client may create in, or
// returns "" for why. It judges each entry that grants one of rights:
//
//   - where the ACL names this client's identity (a tenant), the entry
//     must be one of this client's own ACL (its identity, the acl=
//     entries) with no more rights than that one grants (ops:cdrwa is not
//     an acl= ops:rd: a re-test pass);
//   - where it does not (the superuser), the entry must name one identity
//     (digest, x509, sasl), not many (world, ip, auth).
//
// An ACL naming one digest user twice (a second password, which anyone
// may authenticate with: a:evil beside a's own entry passed as a's, a
// re-test pass) is refused, and so is an entry whose digest ZooKeeper hid
// from this client (it has no admin there), as it may be such a second
// password. named reports that the ACL names this client's identity.
func (d *zkDriver) foreign(acl []zk.ACL, rights int32) (why string, named bool) {
	if why := userTwice(acl); why != "" {
		return why, false
	}
	named = d.names(acl)
	// Exactly: a digest entry whose hash ZooKeeper hid is not this
	// client's, for a second password of its user hides as "user:x" too
	// (a re-test pass). dlock's own nodes grant it admin, so it sees them.
	covered := func(e zk.ACL) bool {
		return slices.ContainsFunc(d.acl, func(a zk.ACL) bool { return a.Scheme == e.Scheme && a.ID == e.ID && e.Perms&^a.Perms == 0 })
	}
	for _, e := range acl {
		if e.Perms&rights == 0 || covered(e) || !named && !manyIDs(e) {
			continue
		}
		if _, hash, _ := strings.Cut(e.ID, ":"); e.Scheme == "digest" && hash == "x" {
			return fmt.Sprintf("lets %s read, create, delete, write or re-ACL its nodes, and hides its digest from this identity, "+
				"so dlock cannot tell it is this identity's (grant this identity a, as dlock's own nodes do)", entryText(e)), named
		}
		return fmt.Sprintf("lets %s read, create, delete, write or re-ACL its nodes, which this URL's identity and acl= entries do not name", entryText(e)), named
	}
	return "", named
}

// names reports whether acl names this client: its URL identity's entry
// (a digest entry whose hash is hidden by its user), or one of its acl=
// entries that grants create, exactly. A client named by neither (the
// superuser) is judged by foreign's looser rule; a tenant known by an
// address or a certificate (acl=ip:…:cdrwa, no URL user) was judged so
// too, and trusted another identity's entries (a re-test pass).
func (d *zkDriver) names(acl []zk.ACL) bool {
	return slices.ContainsFunc(acl, func(e zk.ACL) bool {
		return slices.ContainsFunc(d.self, func(s zk.ACL) bool { return sameID(e, s) }) ||
			e.Perms&zk.PermCreate != 0 && slices.ContainsFunc(d.acl, func(a zk.ACL) bool {
				return a.Scheme == e.Scheme && a.ID == e.ID && a.Perms&zk.PermCreate != 0
			})
	})
}

// userTwice says which digest user acl names with two passwords, or
// returns "". Two hidden hashes ("a:x") may be two passwords; one entry
// repeated (an acl= entry of the URL's own user) is one.
func userTwice(acl []zk.ACL) string {
	ids := map[string]string{}
	for _, e := range acl {
		if e.Scheme != "digest" {
			continue
		}
		u, hash, _ := strings.Cut(e.ID, ":")
		if seen, ok := ids[u]; ok && (seen != hash || hash == "x") {
			return fmt.Sprintf("names the digest user %q twice, with two passwords: anyone may authenticate as either", u)
		}
		ids[u] = hash
	}
	return ""
}

// entryText is an ACL entry as an error shows it: scheme:id, a digest's
// hash left out.
func entryText(e zk.ACL) string {
	if user, _, ok := strings.Cut(e.ID, ":"); ok && e.Scheme == "digest" {
		return "digest:" + user + ":…"
	}
	return e.Scheme + ":" + e.ID
}

// foreignErr is the error for a chroot or lock node ("what" at path) that
// foreign, or claimChroot, refused.
func (d *zkDriver) foreignErr(what, path, why string) error {
	return fmt.Errorf("zklock: %w: the %s %s %s: another client made it, or it was given more; "+
		"through it another tenant could list, take or release this tenant's locks. "+
		"Delete it (dlock makes it again), or set its ACL to this identity's and the acl= entries", dlock.ErrInvalidConfig, what, path, why)
}

// manyIDs reports an entry that grants its rights to many clients at once.
func manyIDs(e zk.ACL) bool { return e.Scheme == "world" || e.Scheme == "ip" || e.Scheme == "auth" }

// vet refuses a lock's node at path, or a node between it and the
// chroot, through which another identity could reach this client's locks:
// Open judged the chroot alone, and another identity that made the chroot
// first could have left lock nodes in it, open to all, before narrowing
// the chroot's ACL (a re-test pass took a tenant's lock so). It reads the
// ACLs from the chroot down and refuses a node that does not grant this
// identity create (as ZooKeeper refuses the create: permErr says so) or
// that foreign refuses. A node that names this identity and passed lets
// only this client's identities create, delete or re-ACL there, so what
// is under it stays theirs: it is not read again by this client. A node
// still missing is read at the next lock, once made.
func (d *zkDriver) vet(ctx context.Context, path string) error {
	if !d.tenant() || d.isVetted(path) {
		return nil
	}
	rel, ok := strings.CutPrefix(path, d.root+"/")
	if !ok {
		return nil
	}
	nodes := []string{d.root}
	for _, seg := range strings.Split(rel, "/") {
		nodes = append(nodes, nodes[len(nodes)-1]+"/"+seg)
	}
	for i, node := range nodes {
		if d.isVetted(node) {
			continue
		}
		var acl []zk.ACL
		_, err := d.call(ctx, nil, func() (err error) { acl, _, err = d.conn.GetACL(node); return err })
		switch {
		case errors.Is(err, zk.ErrNoNode) && i > 0:
			// This client will make it, or another of its identities,
			// as the node above passed; it is judged at the next lock,
			// once made (a create that fails must not leave it passed:
			// a re-test pass).
			return nil
		case errors.Is(err, zk.ErrNoAuth):
			// Not readable: not this client's (its nodes grant it r), and
			// permErr says what is missing.
			return fmt.Errorf("zklock: read the ACL of %s: %w", node, err)
		case transient(err) || errors.Is(err, errNoReply):
			return fmt.Errorf("zklock: %w: read the ACL of %s: %w", errRetry, node, err)
		case err != nil:
			return fmt.Errorf("zklock: read the ACL of %s: %w", node, err)
		}
		if d.mayNotCreate(acl) {
			// An operator's (rd), or a node another identity made for
			// itself: refused, as ZooKeeper would refuse the create, by
			// permErr. Skipping it let another identity that keeps create
			// or delete there swap the nodes below (a re-test pass).
			return fmt.Errorf("zklock: %s grants this identity no create: %w", node, zk.ErrNoAuth)
		}
		what, rights := "lock's node", int32(nodeRights)
		if i == 0 {
			what, rights = "chroot", chrootRights
		}
		why, named := d.foreign(acl, rights)
		if why != "" {
			return d.foreignErr(what, node, why)
		}
		if named {
			// Only this client's identities may create, delete or re-ACL
			// here: what is under it stays theirs. A node that does not
			// name it (the superuser's view) is read at each lock.
			d.markVetted(node)
		}
	}
	return nil
}

// mayNotCreate reports an ACL that names this client's identity without
// create, and grants create to no group of clients: an operator's (acl=
// …:rd), whose lock is refused there.
func (d *zkDriver) mayNotCreate(acl []zk.ACL) bool {
	named := false
	for _, e := range acl {
		mine := slices.ContainsFunc(d.self, func(s zk.ACL) bool { return sameID(e, s) })
		if e.Perms&zk.PermCreate != 0 && (mine || manyIDs(e)) {
			return false
		}
		named = named || mine
	}
	return named
}

func (d *zkDriver) isVetted(path string) bool {
	d.parentsMu.Lock()
	defer d.parentsMu.Unlock()
	return d.vetted[path]
}

// markVetted records that vet passed path, forgetting all it knew once
// it knows maxKnownParents paths.
func (d *zkDriver) markVetted(path string) {
	d.parentsMu.Lock()
	defer d.parentsMu.Unlock()
	if d.vetted == nil || len(d.vetted) >= maxKnownParents {
		d.vetted = map[string]bool{}
	}
	d.vetted[path] = true
}

// openACL reports whether acl lets anyone do anything: no identity to keep
// apart from others.
func openACL(acl []zk.ACL) bool {
	return slices.ContainsFunc(acl, func(a zk.ACL) bool {
		return a.Scheme == "world" && a.ID == "anyone" && a.Perms&(zk.PermCreate|zk.PermDelete) == zk.PermCreate|zk.PermDelete
	})
}

// sameID reports whether two ACL entries may name the same identity: a
// digest entry whose hash ZooKeeper hid ("a:x": getACL hides it from a
// client without admin on the node) is compared by its user. It decides
// only whether an ACL names this client (which makes foreign stricter, or
// a refusal say that create is missing), never that an entry is its own:
// that is foreign's exact comparison.
func sameID(a, b zk.ACL) bool {
	if a.Scheme != b.Scheme {
		return false
	}
	if a.Scheme == "digest" {
		ua, ha, _ := strings.Cut(a.ID, ":")
		ub, hb, _ := strings.Cut(b.ID, ":")
		if ha == "x" || hb == "x" { // hidden: by user (two passwords of one user are refused apart)
			return ua == ub
		}
	}
	return a.ID == b.ID
}

// chrootErr is claimChroot's error: a refused create wraps
// dlock.ErrInvalidConfig, as permErr's do.
func chrootErr(root string, err error) error {
	if errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("zklock: %w: this identity may not create the chroot %s or nodes in it "+
			"(a node's ACL is set by the client that made it; see the zklock package doc): %w", dlock.ErrInvalidConfig, root, err)
	}
	return fmt.Errorf("zklock: chroot %s: %w", root, err)
}
