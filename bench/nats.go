package main

import (
	"context"
	"errors"
	"time"

	"github.com/dlock/dlock/natslock"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// plainNATS is the limit a NATS lock is measured against: a KV create
// with a TTL and a purge at its revision through the same client, a waiter
// watching the key for its removal.
const plainNATS = "plain KV create+purge"

func natsLibs(e *env, addr string) []lib {
	conn := func() (*nats.Conn, error) {
		nc, err := nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectBufSize(-1))
		if err == nil {
			e.Cleanup(nc.Close)
		}
		return nc, err
	}
	return []lib{
		{"nats", "dlock", func(ctx context.Context, name string) (locker, error) {
			nc, err := conn()
			if err != nil {
				return nil, err
			}
			c, err := natslock.Open(ctx, nc, natslock.Options{Bucket: "bench"})
			if err != nil {
				return nil, err
			}
			e.Cleanup(func() { _ = c.Close() })
			return dlockLocker(c, name), nil
		}},
		{"nats", plainNATS, func(ctx context.Context, name string) (locker, error) {
			nc, err := conn()
			if err != nil {
				return nil, err
			}
			js, err := jetstream.New(nc)
			if err != nil {
				return nil, err
			}
			kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "benchplain", History: 1,
				LimitMarkerTTL: time.Minute})
			if err != nil {
				return nil, err
			}
			return newPlainNATS(kv, natsKey(name)), nil
		}},
	}
}

// natsKey keeps a bench lock name's characters to those keys allow.
func natsKey(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return "p." + string(b)
}

func newPlainNATS(kv jetstream.KeyValue, key string) locker {
	var rev uint64
	return funcs{
		l: func(ctx context.Context) error {
			create := func() (bool, error) {
				r, err := kv.Create(ctx, key, nil, jetstream.KeyTTL(30*time.Second))
				if errors.Is(err, jetstream.ErrKeyExists) {
					return false, nil
				}
				rev = r
				return err == nil, err
			}
			for {
				if ok, err := create(); ok || err != nil {
					return err
				}
				// Taken: watch, then try once more (a release between the
				// two would otherwise be missed), then wait.
				w, err := kv.Watch(ctx, key, jetstream.UpdatesOnly(), jetstream.MetaOnly())
				if err != nil {
					return err
				}
				if ok, err := create(); ok || err != nil {
					_ = w.Stop()
					return err
				}
				waitRemoved(ctx, w)
				_ = w.Stop()
			}
		},
		u: func(ctx context.Context) error {
			return kv.Purge(ctx, key, jetstream.LastRevision(rev), jetstream.PurgeTTL(time.Minute))
		},
	}
}

func waitRemoved(ctx context.Context, w jetstream.KeyWatcher) {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok || e == nil || e.Operation() != jetstream.KeyValuePut {
				return
			}
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
