package zklock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dlock/dlock"
	"github.com/go-zookeeper/zk"
)

// permErr returns err unchanged unless ZooKeeper refused it for want of an
// ACL permission (zk.ErrNoAuth) or refused the credentials. It then names
// what is missing and the lock's node, keeps ZooKeeper's own text, and wraps
// dlock.ErrInvalidConfig: waiting cannot cure a missing permission, so a
// Lock fails at once instead of retrying until its ctx ends.
func (d *zkDriver) permErr(err error, name string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoAuth):
		path, _ := d.lockPath(name)
		return fmt.Errorf("zklock: missing ACL permission on %s or its parents for this client's identity: "+
			"a node's ACL is set by the client that created it (see the zklock package doc) (%w): %w",
			path, dlock.ErrInvalidConfig, err)
	case errors.Is(err, zk.ErrAuthFailed):
		return fmt.Errorf("zklock: ZooKeeper refused the credentials (%w): %w", dlock.ErrInvalidConfig, err)
	}
	return err
}

// parseACL parses the acl URL parameter: comma-separated ZooKeeper ACL
// entries scheme:id:perms, where perms are letters of crwda (create, read,
// write, delete, admin), e.g. "digest:ops:HASH:rd,world:anyone:r".
func parseACL(values []string) ([]zk.ACL, error) {
	var acl []zk.ACL
	for _, v := range values {
		for _, e := range strings.Split(v, ",") {
			scheme, rest, ok1 := strings.Cut(e, ":")
			i := strings.LastIndex(rest, ":")
			if !ok1 || i <= 0 || scheme == "" {
				return nil, fmt.Errorf("zklock: %w: acl entry %q: want scheme:id:perms", dlock.ErrInvalidURL, e)
			}
			id, letters := rest[:i], rest[i+1:]
			var perms int32
			for _, c := range letters {
				p, ok := map[rune]int32{'c': zk.PermCreate, 'r': zk.PermRead, 'w': zk.PermWrite, 'd': zk.PermDelete, 'a': zk.PermAdmin}[c]
				if !ok {
					return nil, fmt.Errorf("zklock: %w: acl entry %q: permissions are letters of crwda", dlock.ErrInvalidURL, e)
				}
				perms |= p
			}
			if perms == 0 {
				return nil, fmt.Errorf("zklock: %w: acl entry %q: no permissions", dlock.ErrInvalidURL, e)
			}
			acl = append(acl, zk.ACL{Perms: perms, Scheme: scheme, ID: id})
		}
	}
	return acl, nil
}
