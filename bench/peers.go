package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/dlock/dlock"
	"github.com/dlock/dlock/etcdlock"
	dlockredis "github.com/dlock/dlock/redislock"
	"github.com/dlock/dlock/zklock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// funcs adapts two functions to locker.
type funcs struct{ l, u func(context.Context) error }

func (f funcs) lock(ctx context.Context) error   { return f.l(ctx) }
func (f funcs) unlock(ctx context.Context) error { return f.u(ctx) }

// dlockLocker locks a Mutex of a client.
func dlockLocker(c *dlock.Client, name string) locker {
	m := c.Mutex(name)
	var l *dlock.Lease
	return funcs{
		l: func(ctx context.Context) (err error) { l, err = m.Lock(ctx); return err },
		u: func(ctx context.Context) error { return l.Unlock(ctx) },
	}
}

var plainDelete = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

func redisLibs(e *env, addr string) []lib {
	client := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		e.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	return []lib{
		{"redis", "dlock", func(ctx context.Context, name string) (locker, error) {
			c, err := dlockredis.Open(ctx, client(), dlockredis.Options{})
			if err != nil {
				return nil, err
			}
			e.Cleanup(func() { _ = c.Close() })
			return dlockLocker(c, name), nil
		}},
		{"redis", "redsync", func(_ context.Context, name string) (locker, error) {
			rs := redsync.New(goredis.NewPool(client()))
			m := rs.NewMutex(name, redsync.WithTries(1<<20), redsync.WithExpiry(30*time.Second))
			return funcs{l: m.LockContext, u: func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }}, nil
		}},
		{"redis", "bsm/redislock", func(_ context.Context, name string) (locker, error) {
			c := redislock.New(client())
			var l *redislock.Lock
			opt := &redislock.Options{RetryStrategy: redislock.LinearBackoff(2 * time.Millisecond)}
			return funcs{
				l: func(ctx context.Context) (err error) { l, err = c.Obtain(ctx, name, 30*time.Second, opt); return err },
				u: func(ctx context.Context) error { return l.Release(ctx) },
			}, nil
		}},
		{"redis", "plain SET NX + EVALSHA", func(_ context.Context, name string) (locker, error) {
			rdb := client()
			val := dlock.NewOwnerID()
			return funcs{
				l: func(ctx context.Context) error {
					for {
						ok, err := rdb.SetNX(ctx, name, val, 30*time.Second).Result()
						if err != nil || ok {
							return err
						}
						select { // the minimal waiting: poll
						case <-ctx.Done():
							return ctx.Err()
						case <-time.After(time.Millisecond):
						}
					}
				},
				u: func(ctx context.Context) error { return plainDelete.Run(ctx, rdb, []string{name}, val).Err() },
			}, nil
		}},
	}
}

func etcdLibs(e *env, url string) []lib {
	client := func() (*clientv3.Client, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err == nil {
			e.Cleanup(func() { _ = cli.Close() })
		}
		return cli, err
	}
	return []lib{
		{"etcd", "dlock", func(ctx context.Context, name string) (locker, error) {
			cli, err := client()
			if err != nil {
				return nil, err
			}
			c, err := etcdlock.Open(ctx, cli, etcdlock.Options{})
			if err != nil {
				return nil, err
			}
			e.Cleanup(func() { _ = c.Close() })
			return dlockLocker(c, name), nil
		}},
		{"etcd", "concurrency.Mutex", func(_ context.Context, name string) (locker, error) {
			cli, err := client()
			if err != nil {
				return nil, err
			}
			s, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
			if err != nil {
				return nil, err
			}
			e.Cleanup(func() { _ = s.Close() })
			mu := concurrency.NewMutex(s, name+"/")
			return funcs{l: mu.Lock, u: mu.Unlock}, nil
		}},
		{"etcd", plainEtcd, func(ctx context.Context, name string) (locker, error) {
			cli, err := client()
			if err != nil {
				return nil, err
			}
			return newPlainEtcd(ctx, cli, name)
		}},
	}
}

const (
	plainEtcd = "plain txn + delete"
	plainZK   = "plain create + delete"
)

// newPlainEtcd is the least an etcd lock needs: a put-if-absent
// transaction on a key attached to a lease, a watch for its deletion when
// taken, and a delete.
func newPlainEtcd(ctx context.Context, cli *clientv3.Client, name string) (locker, error) {
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		return nil, err
	}
	key := "plain/" + name
	return funcs{
		l: func(ctx context.Context) error {
			for {
				r, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
					Then(clientv3.OpPut(key, "", clientv3.WithLease(lease.ID))).Commit()
				if err != nil || r.Succeeded {
					return err
				}
				wctx, cancel := context.WithCancel(ctx)
				for w := range cli.Watch(wctx, key, clientv3.WithRev(r.Header.Revision+1), clientv3.WithFilterPut()) {
					if len(w.Events) > 0 || w.Err() != nil {
						break
					}
				}
				cancel()
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		},
		u: func(ctx context.Context) error { _, err := cli.Delete(ctx, key); return err },
	}, nil
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func zkLibs(e *env, addr string) []lib {
	conn := func() (*zk.Conn, <-chan zk.Event, error) {
		c, ev, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogger(quiet{}))
		if err == nil {
			e.Cleanup(c.Close)
		}
		return c, ev, err
	}
	return []lib{
		{"zookeeper", "dlock", func(ctx context.Context, name string) (locker, error) {
			c0, ev, err := conn()
			if err != nil {
				return nil, err
			}
			c, err := zklock.Open(ctx, c0, zklock.Options{SessionTimeout: 4 * time.Second, Events: ev})
			if err != nil {
				return nil, err
			}
			e.Cleanup(func() { _ = c.Close() })
			return dlockLocker(c, name), nil
		}},
		{"zookeeper", "zk.Lock", func(ctx context.Context, name string) (locker, error) {
			c, _, err := conn()
			if err != nil {
				return nil, err
			}
			if err := ensure(c, "/"+name); err != nil {
				return nil, err
			}
			l := zk.NewLock(c, "/"+name, zk.WorldACL(zk.PermAll))
			return funcs{l: func(context.Context) error { return l.Lock() }, u: func(context.Context) error { return l.Unlock() }}, nil
		}},
		{"zookeeper", plainZK, func(ctx context.Context, name string) (locker, error) {
			c, _, err := conn()
			if err != nil {
				return nil, err
			}
			if err := ensure(c, "/"+name); err != nil {
				return nil, err
			}
			return newPlainZK(c, "/"+name+"/plain"), nil
		}},
	}
}

// newPlainZK is the least a ZooKeeper lock needs: create an ephemeral node
// on a ready parent, watch it when taken, and delete it.
func newPlainZK(c *zk.Conn, node string) locker {
	return funcs{
		l: func(ctx context.Context) error {
			for {
				_, err := c.Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
				if !errors.Is(err, zk.ErrNodeExists) {
					return err
				}
				ok, _, ch, err := c.ExistsW(node)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				select {
				case <-ch:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		},
		u: func(context.Context) error { return c.Delete(node, -1) },
	}
}

// ensure creates a path's nodes, for zk.Lock, which needs a ready parent.
// A new connection's first requests fail until its session is up: wait.
func ensure(c *zk.Conn, path string) error {
	for i := 0; ; i++ {
		if _, _, err := c.Exists("/"); err == nil {
			break
		} else if i == 100 {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	p := ""
	for _, part := range splitPath(path) {
		p += "/" + part
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
