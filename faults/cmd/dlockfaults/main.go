// Command dlockfaults runs dlock's fault suite (package faults): worker
// processes contend on one lock name per backend while faults are injected,
// and a checker judges each backend × fault against what the docs promise.
//
//	dlockfaults [-docs docs] [-backends redis,zk] [-faults pause-waiter] [-rounds 3] [-ttl 3s]
//
// It prints the table as it goes, and with -docs rewrites
// DIR/reliability.md. It exits 1 if any verdict failed. "dlockfaults
// worker …" is one worker process, started by the suite itself.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dlock/dlock/faults"

	_ "github.com/dlock/dlock/etcdlock"
	_ "github.com/dlock/dlock/memcachedlock"
	_ "github.com/dlock/dlock/mysqllock"
	_ "github.com/dlock/dlock/natslock"
	_ "github.com/dlock/dlock/pglock"
	_ "github.com/dlock/dlock/redislock"
	_ "github.com/dlock/dlock/redlock"
	_ "github.com/dlock/dlock/zklock"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		if err := worker(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	code, err := suite(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dlockfaults:", err)
	}
	os.Exit(code)
}

func worker(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var cfg faults.WorkerConfig
	fs.IntVar(&cfg.ID, "id", 0, "worker number")
	fs.StringVar(&cfg.URL, "url", "", "backend URL")
	fs.StringVar(&cfg.Name, "name", "", "lock name")
	fs.DurationVar(&cfg.TTL, "ttl", 3*time.Second, "lease TTL")
	fs.DurationVar(&cfg.Hold, "hold", 20*time.Millisecond, "a normal hold")
	fs.DurationVar(&cfg.LongMax, "long", 10*time.Second, "a long hold's limit")
	fs.StringVar(&cfg.Checker, "checker", "", "the checker's URL")
	fs.StringVar(&cfg.Lock, "lock", "", `the lock's kind: "" a mutex, "rw" or "semaphore"`)
	fs.IntVar(&cfg.Permits, "permits", 0, "the semaphore's permits")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return faults.RunWorker(context.Background(), cfg)
}

func suite(args []string) (int, error) {
	fs := flag.NewFlagSet("dlockfaults", flag.ContinueOnError)
	docs := fs.String("docs", "", "rewrite DIR/reliability.md with the results")
	only := fs.String("backends", "", "comma-separated backends to run (default all), e.g. redis,postgres/row")
	onlyF := fs.String("faults", "", "comma-separated faults to run (default all)")
	history := fs.String("history", "", "write each scenario's events to DIR/BACKEND_FAULT.jsonl")
	ci := fs.Bool("ci", false, "the bounded subset CI runs: pause-waiter and blackhole-holder, one injection each")
	kinds := fs.Bool("kinds", true, `also contend through read-write locks, semaphores and elections ("NAME rw", "NAME sem", "NAME elect") where the backend holds them`)
	cfg := faults.Config{}
	fs.IntVar(&cfg.Rounds, "rounds", 3, "injections per backend × fault")
	fs.DurationVar(&cfg.TTL, "ttl", 2*time.Second, "lease TTL (whole seconds, ≥ 2s)")
	fs.IntVar(&cfg.Workers, "workers", 3, "worker processes per scenario")
	fs.DurationVar(&cfg.Hold, "hold", 20*time.Millisecond, "how long a worker holds the lock")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	bin, err := os.Executable()
	if err != nil {
		return 2, err
	}
	cfg.WorkerBin = bin
	fl, bl := faults.Faults(), append(faults.Backends(), faults.ClusterBackends()...)
	if *ci {
		fl, bl, cfg.Rounds = []*faults.Fault{faults.PauseWaiter, faults.BlackholeHolder}, faults.Backends(), 1
	}
	if *kinds {
		bl = append(bl, append(faults.KindBackends(bl), faults.ElectionBackends(bl)...)...)
	}
	plan := faults.Plan(pick(bl, *only, func(b *faults.Backend) string { return b.Name }),
		pick(fl, *onlyF, func(f *faults.Fault) string { return f.Name }))
	total := 0
	for _, g := range plan {
		total += len(g)
	}
	if total == 0 {
		return 2, errors.New("no scenario matches")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pr := newProgress(os.Stderr, total)
	cfg.Progress = pr.status
	start := time.Now()
	var results []faults.Result
	for _, g := range plan {
		results = append(results, runGroup(ctx, cfg, g, pr)...)
		if ctx.Err() != nil {
			break
		}
	}
	pr.finish()
	if *history != "" {
		if err := writeHistories(*history, results); err != nil {
			return 1, err
		}
	}
	faults.WriteTable(os.Stdout, results)
	failed := 0
	for _, r := range results {
		if !r.OK() {
			failed++
		}
	}
	fmt.Fprintf(os.Stderr, "%d scenarios, %d not passed, in %v\n", len(results), failed, time.Since(start).Round(time.Second))
	if *docs != "" {
		if err := writeDoc(filepath.Join(*docs, "reliability.md"), cfg, results, time.Since(start)); err != nil {
			return 1, err
		}
	}
	if failed > 0 || ctx.Err() != nil {
		return 1, nil
	}
	return 0, nil
}

// runGroup runs one store's scenarios; a store that cannot start gives each
// scenario a "not run" result.
func runGroup(ctx context.Context, cfg faults.Config, g []faults.Scenario, pr *progress) (res []faults.Result) {
	e := newEnv()
	defer e.Close()
	defer func() {
		if v := recover(); v != nil {
			s, ok := v.(skip)
			if !ok {
				panic(v)
			}
			for _, sc := range g[len(res):] {
				r := faults.Result{Backend: sc.Backend.Name, Fault: sc.Fault.Name, Error: s.msg}
				pr.result(r)
				res = append(res, r)
			}
		}
	}()
	faults.RunGroup(ctx, e, cfg, g, func(r faults.Result) {
		pr.result(r)
		res = append(res, r)
	})
	return res
}

// pick keeps the items whose names are in the comma-separated list (all if
// it is empty).
func pick[T any](items []T, list string, name func(T) string) []T {
	if list == "" {
		return items
	}
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []T
	for _, it := range items {
		n := name(it)
		if want[n] || want[strings.SplitN(n, "/", 2)[0]] {
			out = append(out, it)
		}
	}
	return out
}

// writeHistories writes each result's events as JSON lines.
func writeHistories(dir string, results []faults.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, r := range results {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		for _, e := range r.History {
			_ = enc.Encode(e)
		}
		name := strings.NewReplacer("/", "-", "×", "x").Replace(r.Backend + "_" + r.Fault)
		if err := os.WriteFile(filepath.Join(dir, name+".jsonl"), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
