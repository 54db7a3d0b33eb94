package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config is how a suite runs.
type Config struct {
	WorkerBin string        // the dlockfaults binary, re-executed as each worker
	TTL       time.Duration // lease TTL (whole seconds, at least 2 s: etcd and memcached need it)
	Workers   int           // worker processes per scenario
	Hold      time.Duration // a normal hold
	Rounds    int           // injections per scenario
	// Progress, if set, is told what the suite is doing.
	Progress func(format string, args ...any)
}

func (c Config) logf(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(format, args...)
	}
}

// run is one scenario: a backend's workers under one fault.
type run struct {
	cfg   Config
	b     *Backend
	f     *Fault
	store *Store
	chk   *Checker
	name  string

	mu      sync.Mutex
	procs   map[int]*proc
	proxies map[int][]*Proxy
	nextID  int
	dead    []string // output of workers that exited on their own

	probes atomic.Int64 // the store's answers to probeStore
}

// Run runs fault f on backend b over store st, and judges it.
func Run(ctx context.Context, cfg Config, b *Backend, f *Fault, st *Store) (res Result) {
	res = Result{Backend: b.Name, Fault: f.Name, Promise: promiseOf(b, f, cfg.TTL, st), Lock: b.Lock, Permits: b.Permits}
	chk, err := NewChecker()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	r := &run{cfg: cfg, b: b, f: f, store: st, chk: chk, procs: map[int]*proc{}, proxies: map[int][]*Proxy{},
		name: fmt.Sprintf("faults/%s/%s/%d", b.Name, f.Name, time.Now().UnixNano())}
	defer func() {
		r.stop()
		_ = chk.Close()
	}()
	workers := cfg.Workers
	if b.Lock == "semaphore" {
		// Workers times permits, so that a waiter waits as long as under a
		// mutex (about two holds; waiter looks for one waiting 30 ms): with
		// only one more worker a permit, a waiter waited about one 20 ms
		// hold and none was found ("no worker was waiting", CI).
		workers *= b.Permits
	}
	if b.Lock == "rw" {
		// Twice the workers, so two write: with one writer among three, a
		// reader waited only through one 20 ms write hold and a writer
		// through one read hold, rarely the 30 ms waiter looks for, and
		// pause-waiter found none ("no worker was waiting", CI, etcd rw).
		workers *= 2
	}
	if res.Probed = !f.OnServers && len(st.Servers) == 1; res.Probed { // see probeStore
		pctx, cancel := context.WithCancel(ctx)
		probed := make(chan struct{})
		go func() { defer close(probed); r.probeStore(pctx) }()
		defer func() { cancel(); <-probed }()
	}
	for range workers {
		if err := r.spawn(); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	// Warm up: every worker has been through a hold or is waiting.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	_, err = chk.Await(wctx, 0, func(e Event) bool { return e.Kind == kindEnd })
	cancel()
	if err != nil {
		res.Error = "no hold completed within 20s: " + r.outputs()
		return res
	}
	stuck := "" // a liveness failure found while injecting
	for round := range cfg.Rounds {
		cfg.logf("%s × %s: injection %d/%d", b.Name, f.Name, round+1, cfg.Rounds)
		chk.Record(-1, kindInject, "")
		if err := f.Inject(ctx, r); err != nil {
			if errors.Is(err, errNoHolder) && ctx.Err() == nil {
				stuck = fmt.Sprintf("before injection %d: %v", round+1, err)
			} else {
				res.Error = fmt.Sprintf("injection %d: %v", round+1, err)
			}
			break
		}
		chk.Record(-1, kindFaultEnd, "")
		r.releaseLong()
		// Settle: the lock is granted again (or the promise's bound
		// passes), then a little more contention.
		from := chk.Len()
		sctx, cancel := context.WithTimeout(ctx, res.Promise.Progress+2*time.Second)
		_, _ = chk.Await(sctx, from, func(e Event) bool { return e.Kind == kindGrant })
		cancel()
		sleep(ctx, 500*time.Millisecond)
		if f.Settle != nil {
			if err := f.Settle(ctx, r); err != nil {
				// A store that does not come back fails the scenario, and
				// what the injections so far showed is judged beside it.
				if msg := fmt.Sprintf("after injection %d: %v", round+1, err); ctx.Err() == nil {
					stuck = msg
				} else {
					res.Error = msg
				}
				break
			}
		}
	}
	r.stop()
	res.History = chk.Events()
	res.Probes = int(r.probes.Load())
	defer func() {
		if stuck != "" {
			res.Fails = append(res.Fails, stuck)
		}
		if len(res.Fails) > 0 {
			res.Output = r.outputs()
		}
	}()
	res.judge(res.History, cfg.TTL, (f == KillConn || f == RestartServer) && (b.SQLMode == "row" || b.SQLMode == "session"))
	return res
}

// spawn starts one more worker, with its own proxies.
func (r *run) spawn() error {
	r.mu.Lock()
	r.nextID++
	id := r.nextID
	r.mu.Unlock()
	var proxies []*Proxy
	var addrs []string
	for _, a := range r.store.Addrs() {
		p, err := NewProxy(a)
		if err != nil {
			return err
		}
		proxies = append(proxies, p)
		addrs = append(addrs, p.Addr)
	}
	p, err := startWorker(r.cfg.WorkerBin, WorkerConfig{ID: id, URL: r.b.URL(addrs, r.cfg.TTL), Name: r.name,
		TTL: r.cfg.TTL, Hold: r.cfg.Hold, LongMax: 3*r.cfg.TTL + 2*time.Second, Checker: r.chk.URL,
		Lock: r.b.Lock, Permits: r.b.Permits})
	if err != nil {
		for _, p := range proxies {
			_ = p.Close()
		}
		return err
	}
	r.mu.Lock()
	r.procs[id], r.proxies[id] = p, proxies
	r.mu.Unlock()
	return nil
}

func (r *run) proc(id int) *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[id]
}

// stop ends every worker and proxy (idempotent).
func (r *run) stop() {
	r.mu.Lock()
	procs, proxies := r.procs, r.proxies
	r.procs, r.proxies = map[int]*proc{}, map[int][]*Proxy{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for id, p := range procs {
		for _, x := range proxies[id] {
			x.Heal() // a cut-off worker could not unlock
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := p.stop(r.cfg.TTL + time.Second)
			if out != "" {
				r.mu.Lock()
				r.dead = append(r.dead, fmt.Sprintf("worker %d: %s", p.id, out))
				r.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, ps := range proxies {
		for _, x := range ps {
			_ = x.Close()
		}
	}
}

// outputs is what the workers printed.
func (r *run) outputs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return tail(fmt.Sprint(r.dead), 2000)
}

// longHolder makes the current holder's hold last until loss and returns
// it, once it has said so.
func (r *run) longHolder(ctx context.Context) (*proc, error) {
	deadline := time.Now().Add(holderWait)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		w, ok := r.chk.Holder()
		p := r.proc(w)
		if !ok || p == nil {
			sleep(ctx, 20*time.Millisecond)
			continue
		}
		from := r.chk.Len()
		p.signal(sigLong)
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := r.chk.Await(actx, from, func(e Event) bool { return e.Kind == kindLong && e.Worker == w })
		cancel()
		if err == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w within %v", errNoHolder, holderWait)
}

// holderWait is how long an injection waits for a holder: the lock not
// being granted for that long is itself a failure.
const holderWait = 15 * time.Second

// errNoHolder: no worker held the lock when a fault was to be injected.
var errNoHolder = errors.New("faults: no worker held the lock")

// releaseLong ends every long hold (a holder that was never told of a loss
// ends its belief here). Only workers in one are signalled: a worker still
// starting has no handler yet, and the signal would kill it.
func (r *run) releaseLong() {
	for _, w := range r.chk.LongHolders() {
		if p := r.proc(w); p != nil {
			p.signal(sigRelease)
		}
	}
}

// waiter returns a worker that has been waiting in Lock for a while.
func (r *run) waiter(ctx context.Context) (*proc, error) {
	for try := 0; try < 500; try++ { // about 5 s: waits come and go with the holds
		ws := r.chk.Waiters(30 * time.Millisecond)
		slices.Sort(ws)
		if len(ws) > 0 {
			if p := r.proc(ws[rand.IntN(len(ws))]); p != nil {
				return p, nil
			}
		}
		sleep(ctx, 10*time.Millisecond)
	}
	return nil, fmt.Errorf("faults: no worker was waiting")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
