package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/listing"
	"github.com/go-zookeeper/zk"
)

// listMaxNodes bounds the nodes List reads, so listing a large tree fails
// plainly instead of reading it all.
const listMaxNodes = 100000

// List implements driver.Lister: it walks the tree from the deepest node the
// prefix names; a node with contender children (sequential "…lock-N"
// nodes) is a Mutex, one with "…latch-N" candidates an election, one with
// Curator's __READ__/__WRIT__ nodes a read-write lock, one with a "leases"
// child a semaphore; each one found is inspected.
func (d *zkDriver) List(ctx context.Context, prefix string) ([]driver.Info, error) {
	dir := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir = strings.Trim(prefix[:i], "/")
	}
	start := d.root + "/" + dir
	if dir == "" {
		start = d.root
		if start == "" {
			start = "/"
		}
	}
	var refs []listing.Ref
	read := 0
	var walk func(path string) error
	walk = func(path string) error {
		if read++; read > listMaxNodes {
			return fmt.Errorf("%w: more than %d nodes under %s: give a longer prefix", dlock.ErrUnsupported, listMaxNodes, start)
		}
		var kids []string
		_, err := d.call(ctx, nil, func() (err error) { kids, _, err = d.conn.Children(path); return err })
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(strings.TrimPrefix(path, d.root), "/")
		found := map[driver.Kind]bool{}
		for _, k := range kids {
			switch {
			case seq(k) >= 0: // a Mutex's contender, or an election's candidate
				found[driver.Exclusive] = true
				continue
			case strings.Contains(k, readBase) || strings.Contains(k, writeBase):
				found[driver.Shared] = true
				continue
			case k == leaseChild:
				found[driver.Permit] = true
			}
		}
		for _, k := range kids {
			if seq(k) >= 0 || strings.Contains(k, readBase) || strings.Contains(k, writeBase) ||
				found[driver.Permit] && (k == leaseChild || k == locksChild) || path == "/" && k == "zookeeper" {
				continue // a hold, or a semaphore's own nodes
			}
			child := strings.TrimSuffix(path, "/") + "/" + k
			// Descend only where names can still start with prefix.
			if n := strings.TrimPrefix(strings.TrimPrefix(child, d.root), "/"); strings.HasPrefix(n, prefix) || strings.HasPrefix(prefix, n) {
				if err := walk(child); err != nil {
					return err
				}
			}
		}
		if name != "" && strings.HasPrefix(name, prefix) {
			for _, fam := range []driver.Kind{driver.Exclusive, driver.Shared, driver.Permit} {
				if found[fam] {
					refs = append(refs, listing.Ref{Name: name, Family: fam})
				}
			}
		}
		return nil
	}
	if err := walk(start); err != nil {
		return nil, fmt.Errorf("zklock: list: %w", err)
	}
	in := listing.For(d)
	in.Inspect = d.inspectElection
	out, err := listing.Inspect(ctx, refs, in)
	if err != nil {
		return nil, fmt.Errorf("zklock: list: %w", err)
	}
	return out, nil
}

// inspectElection is Inspect that tells an election's leader: a holder
// node named latch- (Curator's LeaderLatch) whose data is the leader's
// value alone.
func (d *zkDriver) inspectElection(ctx context.Context, name string) (driver.Info, error) {
	info, err := d.Inspect(ctx, name)
	if err != nil || !info.Held || len(info.Notes) == 0 {
		return info, err
	}
	if node := info.Notes[0]; strings.Contains(node[strings.LastIndexByte(node, '/')+1:], latchInfix) {
		info.Election, info.Label, info.Owner = true, info.Owner, ""
	}
	return info, nil
}
