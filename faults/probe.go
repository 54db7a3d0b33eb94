package faults

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/dlock/dlock/internal/proctree"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Store stalls: a loaded machine starves the store's server as it starves
// a worker (on 2 busy cores, PostgreSQL's backends were seen waiting 1–1.7 s
// on the run queue for 40–65 ms of CPU, and a transaction holding a
// semaphore's state row ran one statement for 1.7 s while every other
// acquire queued behind it). No grant can come while the store's server is
// kept from running, whatever the lock does, so the liveness bounds
// (recovery and progress, never a safety verdict) leave that time out.
//
// Two measures must agree. The controller sends a trivial request (PING,
// SELECT 1, a get of a missing key) to the store's server every probeTick,
// on a connection of its own that goes through no worker's proxy: an
// answer that takes over probeBase + storeStallMin is a wait on the store,
// from probeBase after the send to the answer, less any stall of the
// controller's own process in it (its lateness is not the store's). And
// the kernel's own count of the time the server's threads waited for a
// CPU (/proc/PID/task/TID/schedstat, the most of any one thread from just
// before the send to just after the answer) says how much of that wait was
// starvation: a store slow because it is busy (a heavy script, a client's
// hot loop) or stopped runs or sleeps rather than waits, and is excused
// only what it also waited for a CPU. The smaller of the two is recorded,
// as the latest part of the wait, when it is over storeStallMin. The
// verdicts excuse at most half a bound with it (see waitFor).
//
// Only stores of one server are probed: a cluster (Redlock's nodes, etcd,
// ZooKeeper and NATS with three members) grants with a quorum, so one slow
// member need not hold a grant up. Nor are faults that act on the servers
// (a restart): there a slow answer is the fault's own, which the bounds
// judge.
const (
	probeTick     = 50 * time.Millisecond
	probeBase     = 10 * time.Millisecond // an answer's ordinary latency on a busy machine, never excused
	storeStallMin = 20 * time.Millisecond // shorter excuses are not recorded
	probeTimeout  = 10 * time.Second
)

// prober sends one trivial request to the store and waits for its answer.
type prober struct {
	ask   func(ctx context.Context) error
	close func()
}

// newProber connects to st's server (one: see probeStore) directly.
func newProber(ctx context.Context, st *Store) (*prober, error) {
	if len(st.Servers) == 0 {
		return nil, errors.New("faults: probe: no server")
	}
	addr := st.Servers[0].Addr()
	switch st.Kind {
	case "redis", "redis-aof":
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
		return &prober{func(ctx context.Context) error { return c.Ping(ctx).Err() }, func() { _ = c.Close() }}, nil
	case "etcd":
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: probeTimeout, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		return &prober{func(ctx context.Context) error { _, err := c.Get(ctx, "dlockfaults-probe"); return err },
			func() { _ = c.Close() }}, nil
	case "zk":
		c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
		if err != nil {
			return nil, err
		}
		return &prober{bounded(func() error { _, _, err := c.Exists("/"); return err }), c.Close}, nil
	case "postgres":
		cfg, err := pgxpool.ParseConfig(st.dsn)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns = 1
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return &prober{func(ctx context.Context) error { _, err := p.Exec(ctx, "SELECT 1"); return err }, p.Close}, nil
	case "mariadb":
		db, err := sql.Open("mysql", st.dsn)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		return &prober{func(ctx context.Context) error { _, err := db.ExecContext(ctx, "SELECT 1"); return err },
			func() { _ = db.Close() }}, nil
	case "memcached":
		c := memcache.New(addr)
		c.Timeout = probeTimeout
		return &prober{bounded(func() error {
			if _, err := c.Get("dlockfaults-probe"); !errors.Is(err, memcache.ErrCacheMiss) {
				return err
			}
			return nil
		}), func() { _ = c.Close() }}, nil
	case "nats":
		c, err := nats.Connect("nats://" + addr)
		if err != nil {
			return nil, err
		}
		return &prober{c.FlushWithContext, c.Close}, nil
	}
	return nil, fmt.Errorf("faults: probe: unknown store %q", st.Kind)
}

// bounded makes a call of a client that takes no context end with ctx (the
// call itself goes on to its own timeout).
func bounded(call func() error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// probeStore records the store's stalls in r's checker until ctx ends.
func (r *run) probeStore(ctx context.Context) {
	p, err := newProber(ctx, r.store)
	if err != nil {
		r.cfg.logf("%s × %s: no store probe (its stalls are not measured): %v", r.b.Name, r.f.Name, err)
		return
	}
	defer p.close()
	var own ownStalls
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go own.watch(wctx)
	srv := r.store.Servers[0]
	var rq runQueue
	warm := false // the first answer after a failure pays for a connection
	for ctx.Err() == nil {
		rq.list(srv.Pid())
		before := rq.read()
		sent := time.Now()
		actx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := p.ask(actx)
		cancel()
		got := time.Now()
		after := rq.read()
		if err == nil && warm && got.Sub(sent) > probeBase+storeStallMin {
			waited := own.outside(sent.Add(probeBase), got)
			for _, w := range latest(waited, after.most(before)) {
				r.chk.add(Event{Worker: -1, Kind: kindStoreStall, T: w.from, Until: w.to})
			}
		}
		warm = err == nil
		if warm {
			r.probes.Add(1)
		}
		sleep(ctx, probeTick)
	}
}

// latest is the last d of the windows ws (in order, not overlapping), or
// none when that is under storeStallMin.
func latest(ws []window, d time.Duration) []window {
	var total int64
	for _, w := range ws {
		total += w.to - w.from
	}
	left := min(total, int64(d))
	if left <= int64(storeStallMin) {
		return nil
	}
	var out []window
	for i := len(ws) - 1; i >= 0 && left > 0; i-- {
		w := ws[i]
		w.from = max(w.from, w.to-left)
		left -= w.to - w.from
		out = append([]window{w}, out...)
	}
	return out
}

// runQueue reads how long the threads of a server's processes have waited
// for a CPU (the second field of /proc/PID/task/TID/schedstat, in ns). The
// server's processes (PostgreSQL's backends are children of its first) are
// listed again every second, before a probe is sent.
type runQueue struct {
	root   int
	pids   []int
	listed time.Time
}

// waits is each thread's wait for a CPU so far, by thread id.
type waits map[int]int64

// list looks up the processes of the server whose first process is root,
// if it is another or a second has passed.
func (q *runQueue) list(root int) {
	if root != q.root || time.Since(q.listed) > time.Second {
		q.root, q.listed, q.pids = root, time.Now(), nil
		if root != 0 {
			children, _ := proctree.Read()
			for todo := []int{root}; len(todo) > 0; todo = todo[1:] {
				q.pids = append(q.pids, todo[0])
				todo = append(todo, children[todo[0]]...)
			}
		}
	}
}

// read reads the listed processes' threads.
func (q *runQueue) read() waits {
	w := waits{}
	for _, pid := range q.pids {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
			f := strings.Fields(string(b))
			tid, terr := strconv.Atoi(t.Name())
			if err != nil || terr != nil || len(f) < 2 {
				continue
			}
			if ns, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				w[tid] = ns
			}
		}
	}
	return w
}

// most is the longest any one thread read before waited for a CPU since
// (a thread that began since is left out: its wait may predate before).
func (w waits) most(before waits) time.Duration {
	var m int64
	for tid, ns := range w {
		if was, ok := before[tid]; ok {
			m = max(m, ns-was)
		}
	}
	return time.Duration(m)
}

// ownStalls measures the controller's own process as a worker's
// watchStalls does, for probeStore to take out of a late answer.
type ownStalls struct {
	mu   sync.Mutex
	ws   []window
	seen int64 // the last wake's time: stalls before it are all in ws
}

func (o *ownStalls) watch(ctx context.Context) {
	due := time.Now().Add(stallTick)
	for ctx.Err() == nil {
		sleep(ctx, stallTick)
		now := time.Now()
		o.mu.Lock()
		if now.Sub(due) > stallMin {
			// From the sleep's start, not its due time: the process may
			// have stopped anywhere in it, and an own stall measured
			// long only excuses the store less.
			o.ws = append(o.ws, window{-1, due.Add(-stallTick).UnixNano(), now.UnixNano()})
		}
		o.seen = now.UnixNano()
		o.mu.Unlock()
		due = now.Add(stallTick)
	}
}

// outside is the span from to to, less the process's stalls in it, as
// windows in order. It first waits (a second at most) for the watcher to
// wake after to, so that a stall that ends the span is in ws. The probes
// ask in order, so the stalls that ended before from are dropped.
func (o *ownStalls) outside(from, to time.Time) []window {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		o.mu.Lock()
		caught := o.seen >= to.UnixNano()
		o.mu.Unlock()
		if caught {
			break
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ws = slices.DeleteFunc(o.ws, func(w window) bool { return w.to < from.UnixNano() })
	out := []window{{-1, from.UnixNano(), to.UnixNano()}}
	for _, s := range o.ws {
		var next []window
		for _, w := range out {
			if s.to <= w.from || s.from >= w.to {
				next = append(next, w)
				continue
			}
			if s.from > w.from {
				next = append(next, window{-1, w.from, s.from})
			}
			if s.to < w.to {
				next = append(next, window{-1, s.to, w.to})
			}
		}
		out = next
	}
	return out
}
