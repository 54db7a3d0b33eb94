package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/embedetcd"
	"github.com/spf13/cobra"
)

// allModes are the demo's modes, in the order they run.
var allModes = []string{"local", "trylock", "lock", "segmented", "cas", "fenced"}

// maxInstances bounds --instances: each is a process of its own.
const maxInstances = 64 // as --instances's help says

type demoConfig struct {
	backend, store string
	also           []string // more candidates for --backend all
	instances      int
	buyers         int
	requests       int
	stock          int
	segments       int
	modes          []string
	json           bool
	svg            string // --svg: where to write the latency histograms
	timeout        time.Duration
}

func demoCmd() *cobra.Command {
	cfg := demoConfig{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Reproduce the flash-sale experiment: oversell without a distributed lock, none with one",
		Long: `Demo starts --instances app instances, each its own process with an HTTP server
(POST /deduct_stock: read the stock, check it, write stock-1), behind a
round-robin load balancer, and fires --buyers concurrent buyers sending
--requests purchases at a stock of --stock, once per mode:

  local      a mutex in each instance only (like Java's synchronized): oversells
  trylock    a dlock TryLock: fails fast with "busy, try later", like SETNX
  lock       a blocking dlock Mutex: every sale correct
  segmented  the stock split into --segments parts, each with its own lock
  cas        no lock: a write only if the stock is unchanged since the read
  fenced     lock, and a store write that refuses a stale fencing token
  multi      (only when named in --modes) each order buys one item from each of
             two segments, locking both with LockAll; "sold" counts items

With no backend (--backend, --backend-file, DLOCK_URL) it starts an etcd
inside this process (nothing to install). --backend all runs that etcd and
every backend it is given and can reach: DLOCK_URL, the URLs in
DLOCK_DEMO_BACKENDS (separated by spaces) and each --also URL; it says which
it skipped and why. mem:// is refused: each app instance is its own process,
and would have its own in-process store.
The stock lives in that etcd unless --store names etcd://, redis://, postgres://
or mysql:// (table dlock_demo_stock; a password may come from password_file=).
An etcd:// or mysql:// store reads host, database and user info only and
refuses other parameters; a SQL store ignores the lock backend's mode= and
max_held=, but the backend's other parameters are not the store's. The
store must answer within --connect-timeout.
Exit status 1 if any mode but local oversells, loses a sale or fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(cfg.modes) == 0 {
				return fail(exitUsage, "--modes names no mode (want some of %s)", strings.Join(append(slices.Clone(allModes), optInModes...), ","))
			}
			segmented := false
			for _, m := range cfg.modes {
				if !slices.Contains(allModes, m) && !slices.Contains(optInModes, m) {
					return fail(exitUsage, "unknown mode %q (want %s)", m, strings.Join(append(slices.Clone(allModes), optInModes...), ","))
				}
				segmented = segmented || m == "segmented" || m == "multi"
			}
			if cfg.instances < 1 || cfg.buyers < 1 || cfg.requests < 1 || cfg.stock < 1 || cfg.segments < 1 || cfg.timeout <= 0 {
				return fail(exitUsage, "--instances, --buyers, --requests, --stock, --segments and --timeout must be positive")
			}
			if cfg.instances > maxInstances {
				return fail(exitUsage, "--instances %d: at most %d (each is a process of its own)", cfg.instances, maxInstances)
			}
			if segmented && cfg.segments > cfg.stock {
				return fail(exitUsage, "--segments %d is more than --stock %d: a segment would start empty", cfg.segments, cfg.stock)
			}
			if cfg.svg != "" {
				if fi, err := os.Stat(filepath.Dir(cfg.svg)); err != nil || !fi.IsDir() {
					return fail(exitUsage, "--svg %s: no directory %s to write it in", esc(cfg.svg), esc(filepath.Dir(cfg.svg)))
				}
			}
			cfg.json = cfg.json || jsonOutput()
			if global.backend == "all" {
				cfg.backend = "all"
			} else if global.backend != "" || global.backendFile != "" || os.Getenv("DLOCK_URL") != "" {
				u, err := backendURL(cmd.Context())
				if err != nil {
					return err
				}
				cfg.backend = u
			}
			for _, u := range cfg.also {
				warnArgvSecret("--also", u)
			}
			warnArgvSecret("--store", cfg.store)
			if cfg.backend != "all" && len(cfg.also) > 0 {
				return fail(exitUsage, "--also goes with --backend all")
			}
			return runDemo(cmd.Context(), cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&cfg.also, "also", nil, "with --backend all: another backend URL to try (repeatable)")
	f.StringVar(&cfg.store, "store", "", "stock store: etcd://, redis://, postgres:// or mysql:// URL (default: the embedded etcd)")
	f.IntVar(&cfg.instances, "instances", 2, "app instances (processes, at most 64)")
	f.IntVar(&cfg.buyers, "buyers", 30, "concurrent buyers")
	f.IntVar(&cfg.requests, "requests", 300, "purchase requests per mode")
	f.IntVar(&cfg.stock, "stock", 100, "initial stock")
	f.IntVar(&cfg.segments, "segments", 4, "stock segments in segmented mode")
	f.StringSliceVar(&cfg.modes, "modes", allModes, "modes to run")
	f.StringVar(&cfg.svg, "svg", "", "also write each mode's latency histogram to this SVG file")
	f.BoolVar(&cfg.json, "json", false, "print results as JSON")
	_ = f.MarkDeprecated("json", "use -o json")
	f.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "time limit of each mode")
	return cmd
}

// demoRow is one backend and mode's result.
type demoRow struct {
	Backend    string  `json:"backend"`
	Mode       string  `json:"mode"`
	Requests   int     `json:"requests"`
	Sold       int     `json:"sold"`
	Busy       int     `json:"busy"`
	SoldOut    int     `json:"sold_out"`
	Stale      int     `json:"stale_rejected"`
	Errors     int     `json:"errors"`
	FinalStock int     `json:"final_stock"`
	Oversold   int     `json:"oversold"`
	Lost       int     `json:"lost"`
	RPS        float64 `json:"rps"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	// Histogram counts the requests by latency, in the buckets of
	// latency_buckets_ms: ≤1, ≤2, ≤5, …, ≤2000 ms, and above.
	Histogram []int `json:"histogram"`
	// TimedOut says --timeout ended the mode before all its requests were
	// answered (Requests counts those that were): a failure in any mode.
	TimedOut bool `json:"timed_out"`
}

// bad reports a wrong result in a mode that should be correct, or a mode
// cut short by --timeout.
func (r demoRow) bad() bool {
	return r.TimedOut || r.Mode != "local" && (r.Oversold > 0 || r.Lost > 0 || r.Errors > 0)
}

// failure is what a bad row's exit message says.
func (r demoRow) failure(cfg demoConfig) string {
	if r.TimedOut {
		return fmt.Sprintf("%s mode on %s: timed out (--timeout %v) with %d of %d requests answered", r.Mode, r.Backend, cfg.timeout, r.Requests, cfg.requests)
	}
	return fmt.Sprintf("%s mode on %s: oversold %d, lost %d, errors %d", r.Mode, r.Backend, r.Oversold, r.Lost, r.Errors)
}

func runDemo(ctx context.Context, cfg demoConfig, out io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var emb *embedetcd.Member
	embedded := func() (string, error) {
		if emb == nil {
			progressf("starting an embedded etcd…")
			m, err := embedetcd.Start(embedetcd.Options{NoFsync: true})
			if err != nil {
				return "", err
			}
			emb = m
		}
		return "etcd://" + strings.TrimPrefix(emb.ClientURL, "http://"), nil
	}
	defer func() {
		if emb != nil {
			emb.Close()
		}
	}()

	type target struct{ label, url string }
	var targets []target
	var skipped []skip
	switch cfg.backend {
	case "":
		u, err := embedded()
		if err != nil {
			return fail(exitFailed, "embedded etcd: %v", err)
		}
		targets = append(targets, target{"etcd (embedded, no fsync)", u})
	case "all":
		u, err := embedded()
		if err != nil {
			return fail(exitFailed, "embedded etcd: %v", err)
		}
		targets = append(targets, target{"etcd (embedded, no fsync)", u})
		for _, c := range demoCandidates(cfg.also) {
			label, reason := demoReachable(ctx, c)
			if reason != "" {
				skipped = append(skipped, skip{Backend: label, Reason: reason})
				fmt.Fprintf(os.Stderr, "dlock: demo: skipping %s: %s\n", label, reason)
				continue
			}
			targets = append(targets, target{label, c})
		}
	default:
		u, err := parseWithin(ctx, cfg.backend)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		if reason := demoRefuses(u); reason != "" {
			return fail(exitUsage, "demo: %s", reason)
		}
		targets = append(targets, target{driver.Redacted(u), cfg.backend})
	}
	storeURL := cfg.store
	if storeURL == "" {
		u, err := embedded()
		if err != nil {
			return fail(exitFailed, "embedded etcd: %v", err)
		}
		storeURL = u
	}

	var rows []demoRow
	for _, t := range targets {
		r, err := demoBackend(ctx, cfg, t.label, t.url, storeURL)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	if cfg.json {
		if rows == nil {
			rows = []demoRow{}
		}
		if skipped == nil {
			skipped = []skip{}
		}
		if err := printJSON(out, demoJSON{Results: rows, Skipped: skipped, BucketsMs: bucketsMs()}); err != nil {
			return err
		}
	} else {
		printTable(out, rows, cfg)
		for _, s := range skipped {
			fmt.Fprintf(out, "skipped %s: %s\n", s.Backend, s.Reason)
		}
	}
	if cfg.svg != "" {
		if err := writeLatencySVG(cfg.svg, rows); err != nil {
			return fail(exitFailed, "demo: --svg: %v", err)
		}
	}
	for _, r := range rows {
		if r.bad() {
			return fail(exitFailed, "%s", r.failure(cfg))
		}
	}
	return nil
}

// skip is a backend --backend all did not run, and why.
type skip struct {
	Backend string `json:"backend"` // its URL, password masked
	Reason  string `json:"reason"`
}

// demoJSON is what demo -o json prints.
type demoJSON struct {
	Results []demoRow `json:"results"`
	Skipped []skip    `json:"skipped"` // --backend all: backends not run, and why
	// BucketsMs are the upper bounds of the histograms' buckets in ms; the
	// last bucket has none.
	BucketsMs []float64 `json:"latency_buckets_ms"`
}

func bucketsMs() []float64 {
	b := make([]float64, len(latencyBounds))
	for i, d := range latencyBounds {
		b[i] = float64(d) / float64(time.Millisecond)
	}
	return b
}

// demoBackend runs every mode against one lock backend.
func demoBackend(ctx context.Context, cfg demoConfig, label, backendURL, storeURL string) ([]demoRow, error) {
	st, err := openStore(ctx, storeURL)
	if err != nil {
		if ctx.Err() != nil { // an interrupt is no store's fault, nor the user's input
			return nil, fail(exitFailed, "interrupted")
		}
		return nil, fail(exitUsage, "%v", err)
	}
	defer st.close()
	progressf("%s: starting %d instances…", label, cfg.instances)
	addrs, stopInstances, alive, err := startInstances(ctx, cfg, backendURL, storeURL)
	defer stopInstances()
	if err != nil {
		return nil, err
	}
	lb, err := startBalancer(addrs)
	if err != nil {
		return nil, fail(exitFailed, "load balancer: %v", err)
	}
	defer lb.Close()

	var b [6]byte
	_, _ = rand.Read(b[:])
	run := hex.EncodeToString(b[:])
	var rows []demoRow
	for _, mode := range cfg.modes {
		keys := stockKeys(run, mode, cfg.segments)
		parts := []int{cfg.stock}
		if mode == "segmented" || mode == "multi" {
			parts = splitStock(cfg.stock, cfg.segments)
		}
		for i, k := range keys {
			if err := within(ctx, func(ctx context.Context) error { return st.reset(ctx, k, parts[i]) }); err != nil {
				return nil, storeFailed(ctx, err)
			}
		}
		row := buy(ctx, cfg, "http://"+lb.Addr+"/deduct_stock?run="+run+"&mode="+mode, label, mode)
		row.Sold *= itemsPerOrder(mode)
		if ctx.Err() != nil {
			return nil, fail(exitFailed, "interrupted")
		}
		for _, k := range keys {
			var v int
			err := within(ctx, func(ctx context.Context) (err error) { v, _, err = st.get(ctx, k); return err })
			if err != nil {
				return nil, storeFailed(ctx, err)
			}
			row.FinalStock += v
		}
		decrements := cfg.stock - row.FinalStock
		row.Oversold = max(row.Sold-cfg.stock, row.Sold-decrements, 0)
		row.Lost = max(decrements-row.Sold, 0)
		rows = append(rows, row)
		if err := alive(); err != nil {
			return nil, fail(exitFailed, "%s mode: %v", mode, err)
		}
	}
	return rows, nil
}

// buy fires cfg.requests purchases from cfg.buyers concurrent buyers.
func buy(ctx context.Context, cfg demoConfig, target, label, mode string) demoRow {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.buyers}}
	defer client.CloseIdleConnections()
	row := demoRow{Backend: label, Mode: mode}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		next      atomic.Int64
		done      atomic.Int64
		wg        sync.WaitGroup
	)
	bar := startProgress(label, mode, cfg.requests, &done)
	start := time.Now()
	for range cfg.buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(cfg.requests) && ctx.Err() == nil {
				t0 := time.Now()
				res := purchase(ctx, client, target)
				d := time.Since(t0)
				if res == "" && ctx.Err() != nil {
					// Cut short by --timeout (or an interrupt): not an
					// answer, so not an error; the row says it timed out.
					break
				}
				mu.Lock()
				latencies = append(latencies, d)
				row.Requests++
				switch res {
				case resSold:
					row.Sold++
				case resSoldOut:
					row.SoldOut++
				case resBusy:
					row.Busy++
				case resStale:
					row.Stale++
				default:
					row.Errors++
				}
				mu.Unlock()
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	row.TimedOut = row.Requests < cfg.requests
	elapsed := time.Since(start)
	bar.finish(elapsed)
	row.RPS = float64(row.Requests) / elapsed.Seconds()
	slices.Sort(latencies)
	row.P50ms, row.P99ms = percentile(latencies, 0.50), percentile(latencies, 0.99)
	row.Histogram = histogram(latencies)
	return row
}

func purchase(ctx context.Context, client *http.Client, target string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return ""
	}
	resp, err := client.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var body struct{ Result string }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return ""
	}
	return body.Result
}

func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(int(float64(len(sorted))*p), len(sorted)-1)
	return float64(sorted[i].Microseconds()) / 1000
}

// storeFailed is the error of a demo whose stock store failed a request,
// or "interrupted" if ctx ended (the store then only saw the end).
func storeFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fail(exitFailed, "interrupted")
	}
	return fail(exitFailed, "store: %v", err)
}
