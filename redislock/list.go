package redislock

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dlock/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// listTag escapes a name as keys.go's tagEscaper does inside the hash tag;
// listUntag undoes it.
var (
	listTag   = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")
	listUntag = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")
	// globEscaper quotes the characters SCAN MATCH treats as patterns.
	globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)
)

// List implements driver.Lister: it SCANs for the lock keys under the
// prefix (on every master of a Cluster) and inspects each.
func (d *redisDriver) List(ctx context.Context, prefix string) ([]driver.Info, error) {
	head := d.prefix + ":{"
	match := globEscaper.Replace(head+listTag.Replace(prefix)) + "*}"
	var (
		mu    sync.Mutex
		names = map[string]bool{}
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, match, 1000).Iterator()
		for it.Next(ctx) {
			key := it.Val()
			if !strings.HasPrefix(key, head) || !strings.HasSuffix(key, "}") {
				continue
			}
			mu.Lock()
			names[listUntag.Replace(key[len(head):len(key)-1])] = true
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	if cc, ok := d.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, d.rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("redislock: list: %w", err)
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	out := make([]driver.Info, 0, len(sorted))
	for _, name := range sorted {
		info, err := d.Inspect(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("redislock: list: %w", err)
		}
		if info.Held {
			out = append(out, info)
		}
	}
	return out, nil
}
