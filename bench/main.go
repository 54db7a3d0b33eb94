// Command bench measures dlock side by side with the locks Go services use
// today (redsync, bsm/redislock, etcd's concurrency.Mutex, go-zookeeper's
// Lock) and the plain-client limit of each store, on servers it starts
// itself on loopback, and writes docs/benchmarks.json, a Markdown table into
// docs/benchmarks.md and SVG charts.
//
//	cd bench && go run .             # or: make bench
//	go run . -only redis -runs 1     # a quick look
//	go run . -kinds -only redis      # read-write lock and semaphore against the mutex; prints only
//	go run . -bounds                 # the best those scenarios can give under their rules
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// locker is one contender: its own client or session, as a process would
// have.
type locker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

// lib makes contenders of one library on one store.
type lib struct {
	store, name string
	new         func(ctx context.Context, lockName string) (locker, error)
}

// result is one library in one scenario: the median of its runs, with the
// range.
type result struct {
	Store      string    `json:"store"`
	Scenario   string    `json:"scenario"`
	Library    string    `json:"library"`
	OpsPerSec  float64   `json:"ops_per_sec"`
	OpsRange   []float64 `json:"ops_range"`
	HeldPct    float64   `json:"held_pct,omitempty"`
	HandoffP50 float64   `json:"handoff_p50_ms,omitempty"`
	HandoffP99 float64   `json:"handoff_p99_ms,omitempty"`
	WaitP50    float64   `json:"wait_p50_ms,omitempty"`
	WaitP99    float64   `json:"wait_p99_ms,omitempty"`
	MaxMin     float64   `json:"max_min,omitempty"`
	Reacquire  float64   `json:"reacquire_pct,omitempty"`
	Errors     int64     `json:"errors"`
	Failed     string    `json:"failed,omitempty"`
	// Isolated method only, medians: bytes allocated and client CPU per
	// operation (the whole client process's).
	AllocPerOp float64 `json:"alloc_bytes_per_op,omitempty"`
	CPUPerOp   float64 `json:"client_cpu_us_per_op,omitempty"`
	// The server's CPU per operation, µs (not for etcd, embedded in the
	// parent).
	ServerCPUPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
	// The ratio to the store's plain limit in each run: median and range.
	Ratio      float64   `json:"ratio_to_plain,omitempty"`
	RatioRange []float64 `json:"ratio_to_plain_range,omitempty"`
}

// report is docs/benchmarks.json.
type report struct {
	Date       string       `json:"date"`
	Method     string       `json:"method"`
	Duration   string       `json:"duration"`
	Runs       int          `json:"runs"`
	Command    []string     `json:"args"`
	LoadBefore string       `json:"load_before"` // /proc/loadavg when the run started
	LoadAfter  string       `json:"load_after"`  // and when it ended
	Results    []result     `json:"results"`
	Kinds      []kindResult `json:"kinds"`
	ManyLeases []manyResult `json:"many_leases"`
	// The delayed scenario: a one-byte round trip through its proxy, ms,
	// before its runs and after (proxyRoundTrip).
	DelayedRTT []float64 `json:"delayed_round_trip_ms,omitempty"`
}

// run is one measurement.
type run struct {
	ops               float64
	heldPct           float64
	handoffs, waits   []time.Duration
	maxMin, reacquire float64
	errors            int64
	// turns: bytes allocated and client CPU µs per operation
	allocPerOp, cpuPerOp, serverCPUPerOp float64
}

func main() {
	dur := flag.Duration("duration", 3*time.Second, "length of each run")
	runs := flag.Int("runs", 3, "runs per scenario (the median is reported)")
	only := flag.String("only", "redis,etcd,zookeeper,nats", "stores to measure")
	docs := flag.String("docs", "../docs", "where to write results")
	leases := flag.Int("leases", 10000, "leases held in the many-leases scenario (0 skips it)")
	kinds := flag.Bool("kinds", false, "measure only read-write locks and semaphores against the mutex (kinds.go), print a table, write nothing")
	noKinds := flag.Bool("nokinds", false, "skip the read-write lock and semaphore scenarios")
	method := flag.String("method", "turns", "uncontended, 16 names and contended: isolated (each library's run a process of its own, runs interleaved) "+
		"or sliced (one process, the libraries of a store taking turns of duration/20 in each run; contended: one after another), "+
		"or turns (uncontended and 16 names: each library a process of its own, all alive, taking turns of duration/-slices; contended as isolated)")
	warm := flag.Duration("warm", 500*time.Millisecond, "isolated: untimed warm-up in each process before the timed part (throughput scenarios)")
	flag.DurationVar(&kindHold, "hold", kindHold, "how long each hold of the kinds scenarios lasts")
	scenarios := flag.String("scenarios", "uncontended,16 names,contended,"+delayedScenario, "the peer scenarios to run")
	flag.IntVar(&turnSlices, "slices", turnSlices, "turns: how many turns each library takes in one run")
	bounds := flag.Bool("bounds", false, "only print the best the kinds scenarios can give under their rules (bound.go), measuring nothing")
	redraw := flag.Bool("charts", false, "only redraw the charts from the docs' benchmarks.json")
	// Set by the parent when it runs itself as a child (isolated.go).
	serve := flag.Bool("serve", false, "internal: with -child, take turns at the parent's word (the turns method)")
	child := flag.String("child", "", "internal: run one scenario of one library against the given servers and print the result as JSON")
	childStore := flag.String("store", "", "internal: the child's store")
	childLib := flag.String("lib", "", "internal: the child's library")
	var childSrv servers
	flag.StringVar(&childSrv.Redis, "redis", "", "internal: the child's Redis address")
	flag.StringVar(&childSrv.Etcd, "etcd", "", "internal: the child's etcd client URL")
	flag.StringVar(&childSrv.ZooKeeper, "zk", "", "internal: the child's ZooKeeper address")
	flag.StringVar(&childSrv.NATS, "nats", "", "internal: the child's nats-server address")
	flag.Parse()
	if *bounds {
		printBounds(os.Stdout)
		return
	}
	if *redraw {
		if err := redrawCharts(*docs); err != nil {
			log.Fatal(err)
		}
		return
	}
	ctx := context.Background()
	env := newEnv()
	if *child != "" && *serve {
		err := serveTurns(ctx, env, childSrv, *child, *childStore, *childLib)
		env.Close()
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	if *child != "" {
		r := runChild(ctx, env, childSrv, *child, *childStore, *childLib, *dur, *warm)
		env.Close()
		if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
			log.Fatal(err)
		}
		return
	}
	defer env.Close()
	if *method != "isolated" && *method != "sliced" && *method != "turns" {
		log.Fatalf("unknown method %q", *method)
	}
	stores := strings.Split(*only, ",")
	loadBefore := loadAvg()
	srv := startServers(env, stores)
	if *kinds {
		printKinds(os.Stdout, kindScenarios(ctx, srv, stores, *dur, *runs), *dur, *runs)
		return
	}
	libs := libsOf(env, srv, stores)

	// Warm every store and library up first (the JVM behind ZooKeeper
	// runs twice as fast once warm), untimed.
	for _, l := range libs {
		fmt.Fprintf(os.Stderr, "%-10s warm-up      %s\n", l.store, l.name)
		if *method != "sliced" {
			_, _ = spawn(ctx, srv, "16 names", l.store, l.name, *dur/2, 0)
			continue
		}
		for _, prep := range []func(context.Context, lib) (stepper, error){uncontendedPrep, distinct16Prep} {
			if step, err := prep(ctx, l); err == nil {
				_, _ = step(ctx, *dur/2)
			}
		}
	}
	var results []result
	var delayedRTT []float64
	rtt := func(d time.Duration) { // what the delayed scenario's proxies add now
		t, err := proxyRoundTrip(env, d, 200)
		if err != nil {
			log.Fatalf("round trip through a delaying proxy: %v", err)
		}
		delayedRTT = append(delayedRTT, float64(t.Microseconds())/1000)
		fmt.Fprintf(os.Stderr, "a round trip through a proxy delaying %v each way: %v (median of 200)\n", d, t)
	}
	for _, sc := range []struct {
		name  string
		prep  func(context.Context, lib) (stepper, error) // throughput scenarios, run in slices
		fn    func(context.Context, lib, time.Duration) (run, error)
		delay time.Duration // > 0: every store behind a proxy delaying each way by it (delay.go)
	}{{"uncontended", uncontendedPrep, nil, 0}, {"16 names", distinct16Prep, nil, 0}, {"contended", nil, contended, 0},
		{delayedScenario, uncontendedPrep, nil, netDelay}} {
		if !slices.Contains(strings.Split(*scenarios, ","), sc.name) {
			continue
		}
		srv, libs := srv, libs // the servers' addresses, and libraries using them
		if sc.delay > 0 {
			srv = delayedServers(env, srv, sc.delay)
			libs = libsOf(env, srv, stores)
			rtt(sc.delay)
		}
		rs := make([][]run, len(libs))
		failed := make([]error, len(libs))
		cost := make([][3]float64, len(libs)) // bytes allocated, client and server CPU µs per operation
		if *method == "isolated" || (*method == "turns" && sc.prep == nil) {
			var got [][]childResult
			got, failed = isolatedRuns(ctx, srv, libs, sc.name, *dur, *warm, *runs)
			for j := range libs {
				for _, r := range got[j] {
					rs[j] = append(rs[j], r.run())
				}
				cost[j] = [3]float64{medianOf(got[j], func(r childResult) float64 { return r.AllocPerOp }),
					medianOf(got[j], func(r childResult) float64 { return r.CPUPerOp }),
					medianOf(got[j], func(r childResult) float64 { return r.ServerCPUPerOp })}
			}
		}
		for i := range *runs {
			if *method == "isolated" || (*method == "turns" && sc.prep == nil) {
				break
			}
			if *method == "turns" {
				for _, g := range byStore(libs) {
					fmt.Fprintf(os.Stderr, "%-10s %-12s its %d libraries, each its own process, in turns of %v  run %d/%d…\n",
						libs[g[0]].store, sc.name, len(g), *dur/time.Duration(turnSlices), i+1, *runs)
					sub, subFailed := make([]lib, len(g)), make([]error, len(g))
					for k, j := range g {
						sub[k], subFailed[k] = libs[j], failed[j]
					}
					got := turnsRun(ctx, srv, sub, sc.name, *dur, *warm, subFailed)
					for k, j := range g {
						if failed[j] = subFailed[k]; failed[j] == nil {
							rs[j] = append(rs[j], got[k])
						}
					}
					for _, j := range g { // medians of the runs so far
						a, c, s := make([]float64, len(rs[j])), make([]float64, len(rs[j])), make([]float64, len(rs[j]))
						for i, r := range rs[j] {
							a[i], c[i], s[i] = r.allocPerOp, r.cpuPerOp, r.serverCPUPerOp
						}
						if len(a) > 0 {
							cost[j][0], _ = medianRange(a)
							cost[j][1], _ = medianRange(c)
							cost[j][2], _ = medianRange(s)
						}
					}
				}
				continue
			}
			if sc.prep != nil { // the libraries of a store share each run, in turns
				for _, g := range byStore(libs) {
					fmt.Fprintf(os.Stderr, "%-10s %-12s its %d libraries in turns of %v  run %d/%d…\n",
						libs[g[0]].store, sc.name, len(g), *dur/nSlices, i+1, *runs)
					sub, subFailed := make([]lib, len(g)), make([]error, len(g))
					for k, j := range g {
						sub[k], subFailed[k] = libs[j], failed[j]
					}
					got := sliced(ctx, srv, sub, sc.prep, *dur, subFailed)
					for k, j := range g {
						if failed[j] = subFailed[k]; failed[j] == nil {
							rs[j] = append(rs[j], got[k])
						}
					}
				}
				continue
			}
			// Runs alternate between libraries, so a drift of the
			// machine's speed falls on all of them alike.
			for j, l := range libs {
				if failed[j] != nil {
					continue
				}
				fmt.Fprintf(os.Stderr, "%-10s %-12s %-22s run %d/%d…\n", l.store, sc.name, l.name, i+1, *runs)
				r, err := sc.fn(ctx, l, *dur)
				if err != nil { // report it and go on: one failure must not lose the rest
					failed[j] = err
					fmt.Fprintf(os.Stderr, "  failed: %v\n", err)
					continue
				}
				rs[j] = append(rs[j], r)
			}
		}
		for j, l := range libs {
			if failed[j] != nil {
				results = append(results, result{Store: l.store, Scenario: sc.name, Library: l.name,
					OpsRange: []float64{0, 0}, Errors: -1, Failed: failed[j].Error()})
				continue
			}
			res := summarise(l, sc.name, rs[j])
			if sc.delay == 0 { // delayed: a turn's few hundred operations are too few to divide costs by (report.go)
				res.AllocPerOp, res.CPUPerOp, res.ServerCPUPerOp = cost[j][0], cost[j][1], cost[j][2]
			}
			// The ratio to the store's plain limit run by run (the runs
			// of one round are the closest in time), its median and range.
			for k, p := range libs {
				if p.store == l.store && strings.HasPrefix(p.name, "plain") && failed[k] == nil && len(rs[k]) == len(rs[j]) {
					var ratios []float64
					for i := range rs[j] {
						ratios = append(ratios, rs[j][i].ops/rs[k][i].ops)
					}
					res.Ratio, res.RatioRange = medianRange(ratios)
				}
			}
			results = append(results, res)
		}
		if sc.delay > 0 {
			rtt(sc.delay)
		}
	}
	var ks []kindResult
	if !*noKinds {
		ks = kindScenarios(ctx, srv, stores, *dur, *runs)
	}
	var many []manyResult
	if *leases > 0 {
		for _, st := range manyStores(srv, stores) {
			var rs []manyResult
			for i := range *runs {
				fmt.Fprintf(os.Stderr, "%-10s %d leases   dlock                  run %d/%d…\n", st.store, *leases, i+1, *runs)
				rs = append(rs, manyLeases(ctx, st.store, st.ttl, st.open, *leases))
			}
			many = append(many, medianMany(rs))
		}
	}
	if err := write(*docs, report{Results: results, Kinds: ks, ManyLeases: many, DelayedRTT: delayedRTT, Method: *method,
		Duration: dur.String(), Runs: *runs, Command: os.Args[1:],
		LoadBefore: loadBefore, LoadAfter: loadAvg()}); err != nil {
		log.Fatal(err)
	}
}

// loadAvg returns the machine's load averages over 1, 5 and 15 minutes.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// summarise reports the run with the median throughput, and the range.
func summarise(l lib, scenario string, rs []run) result {
	rs = slices.Clone(rs) // the caller pairs the runs of libraries by their order
	sort.Slice(rs, func(i, j int) bool { return rs[i].ops < rs[j].ops })
	m := rs[len(rs)/2]
	res := result{Store: l.store, Scenario: scenario, Library: l.name, OpsPerSec: m.ops,
		OpsRange: []float64{rs[0].ops, rs[len(rs)-1].ops}, HeldPct: m.heldPct, MaxMin: m.maxMin, Reacquire: m.reacquire}
	for _, r := range rs {
		res.Errors += r.errors
	}
	res.HandoffP50, res.HandoffP99 = pct(m.handoffs, 50), pct(m.handoffs, 99)
	res.WaitP50, res.WaitP99 = pct(m.waits, 50), pct(m.waits, 99)
	return res
}

func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)*p/100, len(s)-1)].Microseconds()) / 1000
}

// contended: 16 contenders on one name, each holding it 1 ms.
func contended(ctx context.Context, l lib, d time.Duration) (run, error) {
	name := fmt.Sprintf("bench/c/%d", time.Now().UnixNano())
	cs := make([]locker, 16)
	for i := range cs {
		var err error
		if cs[i], err = l.new(ctx, name); err != nil {
			return run{}, err
		}
	}
	var (
		mu       sync.Mutex
		released time.Time
		lastID   = -1
		held     time.Duration
		r        run
		counts   = make([]int, len(cs))
		reacq    int
		total    int
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	start := time.Now()
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				asked := time.Now()
				lctx, cancel := context.WithDeadline(ctx, deadline.Add(5*time.Second))
				err := c.lock(lctx)
				cancel()
				if err != nil {
					mu.Lock()
					r.errors++
					mu.Unlock()
					continue
				}
				got := time.Now()
				mu.Lock()
				r.waits = append(r.waits, got.Sub(asked))
				if !released.IsZero() {
					r.handoffs = append(r.handoffs, got.Sub(released))
				}
				if lastID == i {
					reacq++
				}
				counts[i]++
				total++
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				released, lastID = time.Now(), i
				held += released.Sub(got)
				mu.Unlock()
				if err := c.unlock(ctx); err != nil {
					mu.Lock()
					r.errors++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	lo, hi := slices.Min(counts), slices.Max(counts)
	r.ops = float64(total) / wall.Seconds()
	r.heldPct = 100 * held.Seconds() / wall.Seconds()
	r.maxMin = float64(hi) / float64(max(lo, 1))
	if lo == 0 {
		r.maxMin = float64(hi) // someone starved: report the worst as max/1
	}
	r.reacquire = 100 * float64(reacq) / float64(max(total, 1))
	return r, nil
}

func write(docs string, rep report) error {
	rep.Date = time.Now().UTC().Format("2006-01-02")
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(docs, "benchmarks.json"), b, 0o644); err != nil {
		return err
	}
	if err := charts(docs, rep.Results, rep.Kinds); err != nil {
		return err
	}
	return writeMarkdown(filepath.Join(docs, "benchmarks.md"), rep)
}
