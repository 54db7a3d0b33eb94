package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"time"

	"github.com/dlock/dlock/internal/embedetcd"
	"github.com/dlock/dlock/internal/testserver"
)

// The isolated method: each library's run is a process of its own (this
// program run again with -child and the servers' addresses), and the runs
// of a store's libraries interleave, A B C A B C, so a drift of the
// machine's speed falls on all of them alike. In one process taking turns
// (the sliced method, sliced.go) the libraries share one Go heap and
// runtime: the garbage one library makes is collected, by the background
// mark workers and by allocation assists, during whichever library's turn
// the cycle falls in, and the other libraries' live clients (and, for
// etcd, the embedded server) make the heap larger, so collections are
// rarer than a service using one library would see. That flatters the
// library that allocates most. A process of its own pays for its own
// garbage, as a service does.

// servers are the addresses of the stores the runs use.
type servers struct {
	Redis, Etcd, ZooKeeper, NATS string
}

// startServers starts the stores of only: Redis and ZooKeeper as processes
// of their own, etcd embedded in this (the parent) process, so that in the
// isolated method no client shares a process with a server.
func startServers(e *env, only []string) servers {
	var s servers
	for _, store := range only {
		switch store {
		case "redis":
			s.Redis = testserver.Redis(e).Addr()
		case "etcd":
			m, err := embedetcd.Start(embedetcd.Options{Dir: e.TempDir()})
			if err != nil {
				e.Fatalf("embedded etcd: %v", err)
			}
			e.Cleanup(m.Close)
			s.Etcd = m.ClientURL
		case "zookeeper":
			s.ZooKeeper = testserver.ZooKeeper(e).Addr()
		case "nats":
			s.NATS = testserver.NATSProcess(e).Addr()
		default:
			e.Fatalf("unknown store %q", store)
		}
	}
	return s
}

// libsOf returns the libraries measured on the stores of only.
func libsOf(e *env, srv servers, only []string) []lib {
	var libs []lib
	for _, store := range only {
		switch store {
		case "redis":
			libs = append(libs, redisLibs(e, srv.Redis)...)
		case "etcd":
			libs = append(libs, etcdLibs(e, srv.Etcd)...)
		case "zookeeper":
			libs = append(libs, zkLibs(e, srv.ZooKeeper)...)
		case "nats":
			libs = append(libs, natsLibs(e, srv.NATS)...)
		}
	}
	return libs
}

// childResult is what a child process reports on its stdout, as JSON.
type childResult struct {
	Ops       float64         `json:"ops"` // per second
	Errors    int64           `json:"errors"`
	HeldPct   float64         `json:"held_pct,omitempty"`
	Handoffs  []time.Duration `json:"handoffs,omitempty"`
	Waits     []time.Duration `json:"waits,omitempty"`
	MaxMin    float64         `json:"max_min,omitempty"`
	Reacquire float64         `json:"reacquire,omitempty"`
	MaxInside int64           `json:"max_inside,omitempty"`
	// Of the timed part: bytes allocated, collections and client CPU (the
	// whole process's), per operation; store calls per operation (kinds).
	AllocPerOp float64 `json:"alloc_per_op"`
	GCs        uint32  `json:"gcs"`
	CPUPerOp   float64 `json:"cpu_us_per_op"`
	GCCPUPerOp float64 `json:"gc_cpu_us_per_op"`
	CallsPerOp float64 `json:"calls_per_op,omitempty"`
	// Set by the parent: the server's CPU during the whole child process
	// (warm-up included) per operation timed, in µs; 0 if unknown.
	ServerCPUPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
	Failed         string  `json:"failed,omitempty"`
}

func (c childResult) run() run {
	return run{ops: c.Ops, heldPct: c.HeldPct, handoffs: c.Handoffs, waits: c.Waits,
		maxMin: c.MaxMin, reacquire: c.Reacquire, errors: c.Errors}
}

// kindLibs are the child's -lib values of the kinds scenarios.
var kindOps = map[string]opFunc{"mutex": mutexOp, "rw": rwOp, "sem": semOp}

// runChild measures one library in one scenario in this process: warm
// untimed first (throughput scenarios), then d timed.
func runChild(ctx context.Context, e *env, srv servers, scenario, store, library string, d, warm time.Duration) childResult {
	fail := func(err error) childResult { return childResult{Failed: err.Error()} }
	if scenario == "kind" {
		op, ok := kindOps[library]
		if !ok {
			return fail(fmt.Errorf("unknown kind %q", library))
		}
		stores := manyStores(srv, []string{store}) // the one store asked for, or none
		if len(stores) == 0 {
			return fail(fmt.Errorf("unknown store %q", store))
		}
		k, err := kindRun(ctx, stores[0].open, op, d)
		if err != nil {
			return fail(err)
		}
		return childResult{Ops: k.ops, Errors: k.errs, MaxInside: k.most, AllocPerOp: k.allocPerOp,
			GCs: k.gcs, CPUPerOp: k.cpuPerOp, CallsPerOp: k.callsPerOp}
	}
	l, err := findLib(e, srv, store, library)
	if err != nil {
		return fail(err)
	}
	if scenario == "contended" {
		m0, cpu0 := memNow(), cpuTime()
		r, err := contended(ctx, *l, d)
		if err != nil {
			return fail(err)
		}
		out := childResult{Ops: r.ops, Errors: r.errors, HeldPct: r.heldPct, Handoffs: r.handoffs, Waits: r.waits,
			MaxMin: r.maxMin, Reacquire: r.reacquire}
		out.perOp(m0, cpu0, int64(r.ops*d.Seconds()))
		return out
	}
	prep := throughputPreps[scenario]
	if prep == nil {
		return fail(fmt.Errorf("unknown scenario %q", scenario))
	}
	step, err := prep(ctx, *l)
	if err != nil {
		return fail(err)
	}
	if warm > 0 {
		_, _ = step(ctx, warm)
	}
	m0, cpu0 := memNow(), cpuTime()
	start := time.Now()
	ops, errs := step(ctx, d)
	out := childResult{Ops: float64(ops) / time.Since(start).Seconds(), Errors: errs}
	out.perOp(m0, cpu0, ops)
	return out
}

// perOp fills in the timed part's allocation, collections and CPU per
// operation, from the state at its start.
func (c *childResult) perOp(m0 runtime.MemStats, cpu0 time.Duration, ops int64) {
	g0 := gcAtStart
	m1 := memNow()
	c.GCCPUPerOp = 1e6 * (gcAtStart - g0) / float64(max(ops, 1))
	n := float64(max(ops, 1))
	c.AllocPerOp = float64(m1.TotalAlloc-m0.TotalAlloc) / n
	c.GCs = m1.NumGC - m0.NumGC
	c.CPUPerOp = float64((cpuTime() - cpu0).Microseconds()) / n
}

// gcAtStart is the collector's CPU seconds when memNow last looked.
var gcAtStart float64

func memNow() runtime.MemStats {
	_, gcAtStart = gcSample()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// spawn runs one child and returns its result.
func spawn(ctx context.Context, srv servers, scenario, store, library string, d, warm time.Duration, extra ...string) (childResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return childResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, d+warm+2*time.Minute)
	defer cancel()
	args := append([]string{"-child", scenario, "-store", store, "-lib", library,
		"-duration", d.String(), "-warm", warm.String(),
		"-redis", srv.Redis, "-etcd", srv.Etcd, "-zk", srv.ZooKeeper, "-nats", srv.NATS}, extra...)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = os.Stderr
	s0, known := serverCPU(srv, store)
	out, err := cmd.Output()
	s1, _ := serverCPU(srv, store)
	if err != nil {
		return childResult{}, fmt.Errorf("%s %s %s: %w", store, scenario, library, err)
	}
	var r childResult
	if err := json.Unmarshal(out, &r); err != nil {
		return childResult{}, fmt.Errorf("%s %s %s: %w", store, scenario, library, err)
	}
	if r.Failed != "" {
		return r, fmt.Errorf("%s", r.Failed)
	}
	if n := r.Ops * (d + warm).Seconds(); known && n > 0 {
		r.ServerCPUPerOp = float64((s1 - s0).Microseconds()) / n
	}
	return r, nil
}

// isolatedRuns measures every library of libs in one scenario, runs times,
// each run of each library a process of its own, interleaved: run 1 of
// every library, then run 2, and so on.
func isolatedRuns(ctx context.Context, srv servers, libs []lib, scenario string, d, warm time.Duration, runs int) ([][]childResult, []error) {
	rs := make([][]childResult, len(libs))
	failed := make([]error, len(libs))
	for i := range runs {
		for j, l := range libs {
			if failed[j] != nil {
				continue
			}
			fmt.Fprintf(os.Stderr, "%-10s %-12s %-22s run %d/%d (own process)…\n", l.store, scenario, l.name, i+1, runs)
			r, err := spawn(ctx, srv, scenario, l.store, l.name, d, warm)
			if err != nil {
				failed[j] = err
				fmt.Fprintf(os.Stderr, "  failed: %v\n", err)
				continue
			}
			fmt.Fprintf(os.Stderr, "  %.0f/s, %.0f B/op, client CPU %.0f µs/op of which the collector %.1f µs/op, %d collections; server CPU %.0f µs/op\n",
				r.Ops, r.AllocPerOp, r.CPUPerOp, r.GCCPUPerOp, r.GCs, r.ServerCPUPerOp)
			rs[j] = append(rs[j], r)
		}
	}
	return rs, failed
}

// medianOf returns the median of f over rs.
func medianOf(rs []childResult, f func(childResult) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// findLib returns the library named library on store.
func findLib(e *env, srv servers, store, library string) (*lib, error) {
	for _, c := range libsOf(e, srv, []string{store}) {
		if c.name == library {
			return &c, nil
		}
	}
	return nil, fmt.Errorf("no library %q on %q", library, store)
}
