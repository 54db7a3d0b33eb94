package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// stockStore is the shared store the demo's instances sell from. Reads and
// writes are separate operations, so the race between instances is real.
type stockStore interface {
	// reset sets a stock level and clears its fence.
	reset(ctx context.Context, key string, v int) error
	// set writes a stock level.
	set(ctx context.Context, key string, v int) error
	// get reads a stock level and a version for cas.
	get(ctx context.Context, key string) (v int, version int64, err error)
	// cas writes v if the key is unchanged since version.
	cas(ctx context.Context, key string, version int64, v int) (bool, error)
	// fencedSet writes v unless a write with a higher fencing token came first.
	fencedSet(ctx context.Context, key string, v int, token uint64) (bool, error)
	close() error
}

// openStore opens etcd://…, redis://…, postgres://… or mysql://… as a
// stock store. Its errors, and those of the store's calls, hide the URL's
// secrets: a store's client may quote the URL (go-redis's parse error
// quotes it whole; pgx masks password= and nothing else), and a demo run
// prints them (a re-test pass).
func openStore(ctx context.Context, rawURL string) (stockStore, error) {
	u, err := parseWithin(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	// The store's first requests (a ping, the table) are bounded like a
	// backend's connection: an etcd that never answered hung the demo.
	octx, cancel := context.WithTimeout(ctx, global.connectTimeout)
	defer cancel()
	st, err := openStoreURL(octx, u)
	if err != nil {
		if octx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("store: no answer from %s within %v (--connect-timeout): %w", u.Host, global.connectTimeout, err)
		}
		return nil, driver.RedactError(err, u)
	}
	return secretStore{st, u}, nil
}

// openStoreURL opens the stock store of u, and makes a first request of it
// within ctx.
func openStoreURL(ctx context.Context, u *url.URL) (stockStore, error) {
	switch u.Scheme {
	case "postgres", "postgresql", "mysql":
		// The lock backend's own parameters, for a --store that repeats
		// the --backend URL.
		v := *u
		q := v.Query()
		q.Del("mode")
		q.Del("max_held")
		v.RawQuery = q.Encode()
		u = &v
	}
	switch u.Scheme {
	case "etcd", "mysql":
		// These stores read host, database and user info only: a tls= or
		// a misspelt parameter went unread without a word.
		if u.RawQuery != "" {
			return nil, fmt.Errorf("store: a demo %s:// store reads no URL parameters (%d given): give it a URL of its own", u.Scheme, len(u.Query()))
		}
	}
	switch u.Scheme {
	case "etcd":
		var eps []string
		for _, h := range driver.Hosts(u) {
			eps = append(eps, "http://"+h)
		}
		cfg := clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
		if u.User != nil {
			cfg.Username = u.User.Username()
			cfg.Password, _ = u.User.Password()
		}
		cli, err := clientv3.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		if _, err := cli.Get(ctx, "dlock-demo", clientv3.WithCountOnly()); err != nil {
			_ = cli.Close()
			return nil, fmt.Errorf("store: %w", err)
		}
		return &etcdStore{cli}, nil
	case "redis":
		if len(driver.Hosts(u)) > 1 {
			return nil, errors.New("store: a redis:// store is one server: give one host")
		}
		o, err := redis.ParseURL(u.String()) // u, not the URL as written: password_file= is read
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		o.ContextTimeoutEnabled = true // --connect-timeout bounds the ping, not go-redis's 3 s read timeout and retries
		rdb := redis.NewClient(o)
		if err := rdb.Ping(ctx).Err(); err != nil {
			_ = rdb.Close()
			return nil, fmt.Errorf("store: %w", err)
		}
		return &redisStore{rdb}, nil
	case "postgres", "postgresql", "mysql":
		return openSQLStore(ctx, u)
	}
	return nil, fmt.Errorf("store: %s:// is not a demo store (etcd://, redis://, postgres:// or mysql://)", u.Scheme)
}

// Fences are stored as 20-digit strings, so etcd's byte comparison of
// values orders them as numbers.
func fence(token uint64) string { return fmt.Sprintf("%020d", token) }

type etcdStore struct{ cli *clientv3.Client }

func (s *etcdStore) reset(ctx context.Context, key string, v int) error {
	_, err := s.cli.Txn(ctx).Then(clientv3.OpPut(key, strconv.Itoa(v)), clientv3.OpPut(key+"/fence", fence(0))).Commit()
	return err
}

func (s *etcdStore) set(ctx context.Context, key string, v int) error {
	_, err := s.cli.Put(ctx, key, strconv.Itoa(v))
	return err
}

func (s *etcdStore) get(ctx context.Context, key string) (int, int64, error) {
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return 0, 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, 0, fmt.Errorf("no stock at %s", key)
	}
	v, err := strconv.Atoi(string(resp.Kvs[0].Value))
	return v, resp.Kvs[0].ModRevision, err
}

func (s *etcdStore) cas(ctx context.Context, key string, version int64, v int) (bool, error) {
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", version)).
		Then(clientv3.OpPut(key, strconv.Itoa(v))).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

func (s *etcdStore) fencedSet(ctx context.Context, key string, v int, token uint64) (bool, error) {
	// etcd compares with =, !=, < and >: fence <= token is fence < token+1.
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(key+"/fence"), "<", fence(token+1))).
		Then(clientv3.OpPut(key, strconv.Itoa(v)), clientv3.OpPut(key+"/fence", fence(token))).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

func (s *etcdStore) close() error { return s.cli.Close() }

type redisStore struct{ rdb *redis.Client }

var (
	redisCAS = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0`)
	// The fence key sits beside the stock, so both are one script's.
	redisFenced = redis.NewScript(`if tonumber(redis.call('GET', KEYS[2]) or '0') <= tonumber(ARGV[2]) then
  redis.call('SET', KEYS[1], ARGV[1]) redis.call('SET', KEYS[2], ARGV[2]) return 1 end return 0`)
)

func (s *redisStore) reset(ctx context.Context, key string, v int) error {
	return s.rdb.MSet(ctx, key, v, key+"/fence", 0).Err()
}

func (s *redisStore) set(ctx context.Context, key string, v int) error {
	return s.rdb.Set(ctx, key, v, 0).Err()
}

func (s *redisStore) get(ctx context.Context, key string) (int, int64, error) {
	v, err := s.rdb.Get(ctx, key).Int()
	return v, int64(v), err // the level is its own version: it only goes down
}

func (s *redisStore) cas(ctx context.Context, key string, version int64, v int) (bool, error) {
	n, err := redisCAS.Run(ctx, s.rdb, []string{key}, version, v).Int()
	return n == 1, err
}

func (s *redisStore) fencedSet(ctx context.Context, key string, v int, token uint64) (bool, error) {
	n, err := redisFenced.Run(ctx, s.rdb, []string{key, key + "/fence"}, v, token).Int()
	return n == 1, err
}

func (s *redisStore) close() error { return s.rdb.Close() }

// stockKeys returns the keys a mode's stock lives under: one, or one per
// segment.
func stockKeys(run, mode string, segments int) []string {
	base := "dlock-demo/" + run + "/" + mode + "/stock"
	if mode != "segmented" && mode != "multi" {
		return []string{base}
	}
	keys := make([]string, segments)
	for i := range keys {
		keys[i] = base + "/" + strconv.Itoa(i)
	}
	return keys
}

// splitStock divides stock over n segments, the first ones taking the rest.
func splitStock(stock, n int) []int {
	parts := make([]int, n)
	for i := range parts {
		parts[i] = stock / n
		if i < stock%n {
			parts[i]++
		}
	}
	return parts
}
