package etcdlock

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dlock/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// List implements driver.Lister: the contender keys under the prefix are
// "<prefix><name>/<lease id in hex>"; each name found is inspected.
func (d *etcdDriver) List(ctx context.Context, prefix string) ([]driver.Info, error) {
	resp, err := d.cli.Get(ctx, d.prefix+prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("etcdlock: list: %w", err)
	}
	seen := map[string]bool{}
	var names []string
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), d.prefix)
		i := strings.LastIndexByte(rest, '/')
		if i <= 0 {
			continue
		}
		if _, err := strconv.ParseUint(rest[i+1:], 16, 64); err != nil {
			continue // not a contender key: another program's key under the prefix
		}
		if name := rest[:i]; strings.HasPrefix(name, prefix) && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]driver.Info, 0, len(names))
	for _, name := range names {
		info, err := d.Inspect(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("etcdlock: list: %w", err)
		}
		if info.Held {
			out = append(out, info)
		}
	}
	return out, nil
}
