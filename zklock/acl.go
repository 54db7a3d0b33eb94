package zklock

import (
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/dlock/dlock"
	"github.com/go-zookeeper/zk"
)

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
			if err := checkACLID(scheme, id); err != nil {
				return nil, fmt.Errorf("zklock: %w: acl entry %q: %v", dlock.ErrInvalidURL, e, err)
			}
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

// checkACLID refuses an ACL entry's id that ZooKeeper would take but that
// can match no client, so the grant it was written for would silently not
// be there: a digest id must be user:base64(SHA-1("user:password")), 28
// characters whose '+' and '/' reach here intact (see aclValues); world's
// id is anyone; an ip id is an address or a CIDR range; no id holds
// whitespace.
func checkACLID(scheme, id string) error {
	if id == "" || strings.ContainsAny(id, " \t\r\n") {
		return errors.New("the id is empty or holds whitespace (a '+' written in a URL's query without %2B becomes a space)")
	}
	switch scheme {
	case "digest":
		user, hash, ok := strings.Cut(id, ":")
		if b, err := base64.StdEncoding.DecodeString(hash); !ok || user == "" || err != nil || len(b) != sha1.Size {
			return errors.New("a digest id is user:HASH, HASH being base64(SHA-1(\"user:password\")), 28 characters")
		}
	case "world":
		if id != "anyone" {
			return errors.New("world's only id is anyone")
		}
	case "ip":
		if _, err := netip.ParsePrefix(id); err != nil {
			if _, err := netip.ParseAddr(id); err != nil {
				return errors.New("an ip id is an address or a CIDR range")
			}
		}
	}
	return nil
}

// aclValues returns the acl parameters of a URL's raw query, unescaped as
// a path is: %2B and a plain '+' are both '+'. url.Values would turn a
// plain '+' into a space, and base64 digests hold '+' about as often as
// not, so acl=digest:ops:HASH:rd, written as the docs show it, would name
// an identity nobody has.
func aclValues(rawQuery string) ([]string, error) {
	var out []string
	for _, kv := range strings.Split(rawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if key, err := url.QueryUnescape(k); err != nil || key != "acl" {
			continue // as url.Values reads keys: ac%6C is acl (a re-test pass)
		}
		u, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("zklock: %w: acl %q: %v", dlock.ErrInvalidURL, v, err)
		}
		out = append(out, u)
	}
	return out, nil
}
