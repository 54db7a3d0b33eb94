package zklock

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// listMaxNodes bounds the nodes List reads, so listing a large tree fails
// plainly instead of reading it all.
const listMaxNodes = 100000

// List implements driver.Lister: it walks the tree from the deepest node the
// prefix names; a node with contender children (sequential "…lock-N"
// nodes) is a lock, and each one found is inspected.
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
	var names []string
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
		isLock := false
		for _, k := range kids {
			if seq(k) >= 0 {
				isLock = true
				continue
			}
			if path == "/" && k == "zookeeper" {
				continue
			}
			child := strings.TrimSuffix(path, "/") + "/" + k
			// Descend only where names can still start with prefix.
			if n := strings.TrimPrefix(strings.TrimPrefix(child, d.root), "/"); strings.HasPrefix(n, prefix) || strings.HasPrefix(prefix, n) {
				if err := walk(child); err != nil {
					return err
				}
			}
		}
		if isLock && name != "" && strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
		return nil
	}
	if err := walk(start); err != nil {
		return nil, fmt.Errorf("zklock: list: %w", err)
	}
	sort.Strings(names)
	out := make([]driver.Info, 0, len(names))
	for _, name := range names {
		info, err := d.Inspect(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("zklock: list: %w", err)
		}
		if info.Held {
			out = append(out, info)
		}
	}
	return out, nil
}
