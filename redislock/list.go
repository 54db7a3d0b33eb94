package redislock

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/listing"
	"github.com/dlock/dlock/internal/redisnode"
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
// prefix (on every master of a Cluster): "<prefix>:{<name>}" is a Mutex's
// (or an election's), "…:rw" a read-write lock's, "…:sem" a semaphore's,
// and inspects each.
func (d *redisDriver) List(ctx context.Context, prefix string) ([]driver.Info, error) {
	head := d.prefix + ":{"
	match := globEscaper.Replace(head+listTag.Replace(prefix)) + "*}*"
	families := map[string]driver.Kind{"": driver.Exclusive, ":rw": driver.Shared, ":sem": driver.Permit}
	var (
		mu   sync.Mutex
		refs []listing.Ref
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, match, 1000).Iterator()
		for it.Next(ctx) {
			rest, ok := strings.CutPrefix(it.Val(), head)
			i := strings.IndexByte(rest, '}') // names are escaped: the first } ends the tag
			if !ok || i < 0 {
				continue
			}
			fam, ok := families[rest[i+1:]]
			if !ok {
				continue // a token counter, queue or channel key
			}
			mu.Lock()
			refs = append(refs, listing.Ref{Name: listUntag.Replace(rest[:i]), Family: fam})
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
		return nil, fmt.Errorf("redislock: list: %w", redisnode.PermissionError(err, d.prefix))
	}
	out, err := listing.Inspect(ctx, refs, listing.For(d))
	if err != nil {
		return nil, fmt.Errorf("redislock: list: %w", err)
	}
	return out, nil
}
