package etcdlock

import (
	"context"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The contenders of the lock "n" are the keys "<prefix>n/<lease id in hex>":
// the direct children of its key prefix pfx, "<prefix>n/". The keys of the
// locks named under it ("n/x/<lease>", "n/x/y/<lease>") share that prefix,
// and etcd reads a prefix as a whole, so every read of a lock's queue (a
// range of pfx, sorted by create revision) is filtered by contender and
// taken a page at a time: a lock's line never includes another name's key.
// etcd's own Mutex and `etcdctl lock` do not filter (see the package doc).

// pageSize is how many keys one read of a lock's queue takes.
const pageSize = 64

// contender reports whether key, which starts with pfx, is a contender key
// of pfx's lock: a direct child named by a lease id in hex, as dlock, etcd's
// Mutex and Election and etcdctl name theirs. Not a key of a lock named
// under it, nor another program's key under the prefix ("n/config"), which
// no lock layout writes and nothing would ever delete: Inspect, List and
// every acquire agree that it holds nothing.
func contender(pfx string, key []byte) bool {
	rest := key[len(pfx):]
	if len(rest) == 0 || len(rest) > 16 {
		return false
	}
	for _, c := range rest {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// firstOp reads the keys under pfx created at or after minRev (any if 0),
// oldest first, a page of them.
func firstOp(pfx string, minRev int64, opts ...clientv3.OpOption) clientv3.Op {
	o := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend),
		clientv3.WithLimit(pageSize)}
	if minRev > 0 {
		o = append(o, clientv3.WithMinCreateRev(minRev))
	}
	return clientv3.OpGet(pfx, append(o, opts...)...)
}

// firstIn returns the first contender of pfx's lock in r, a page read by
// firstOp from the start, or nil, and whether it could not tell: the page
// holds none and more keys follow it.
func firstIn(pfx string, r *etcdserverpb.RangeResponse) (kv *mvccpb.KeyValue, unsure bool) {
	for _, kv := range r.Kvs {
		if contender(pfx, kv.Key) {
			return kv, false
		}
	}
	return nil, r.More
}

// nextRev is the create revision the next page starts at, after a page
// that ended at last: last again (keys put by one transaction share a
// create revision, and the page may have cut them), or past it if the
// page started there too, so each page makes progress. step is 1 for
// oldest-first pages, -1 for newest-first ones.
func nextRev(last, start, step int64) int64 {
	if last == start {
		return last + step
	}
	return last
}

// first returns the first contender of pfx's lock (its holder), nil if none,
// and with all, the number of contenders.
func (d *etcdDriver) first(ctx context.Context, pfx string, all bool) (*mvccpb.KeyValue, int, error) {
	var holder *mvccpb.KeyValue
	n := 0
	var seen map[string]bool // keys of a repeated revision, counted once
	for minRev := int64(0); ; {
		or, err := d.cli.Do(ctx, firstOp(pfx, minRev))
		if err != nil {
			return nil, 0, err
		}
		resp := or.Get()
		for _, kv := range resp.Kvs {
			if !contender(pfx, kv.Key) || seen[string(kv.Key)] {
				continue
			}
			if holder == nil {
				holder = kv
				if !all {
					return holder, 1, nil
				}
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[string(kv.Key)] = true
			n++
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return holder, n, nil
		}
		minRev = nextRev(resp.Kvs[len(resp.Kvs)-1].CreateRevision, minRev, 1)
	}
}
