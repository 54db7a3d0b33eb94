// Command observability runs workers that take dlock locks, with
// OpenTelemetry metrics served to Prometheus on /metrics and traces sent
// over OTLP, for the Grafana dashboard beside it (dashboard.json).
//
//	go run ./examples/observability                                  # mem://, /metrics on 127.0.0.1:9464
//	go run ./examples/observability -backend redis://127.0.0.1:6379 -workers 8 -locks 2
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 go run ./examples/observability
//
// Each worker loops: it picks one of -locks names, takes it with dlock.Do
// (waiting at most -max-wait), works for a random while and lets go, all in
// a "job" span of its own, so the dlock.lock and dlock.unlock spans are its
// children. Fewer locks than workers make contention: refusals, wait time.
// Prometheus scrapes http://ADDR/metrics; import dashboard.json into
// Grafana (Dashboards > New > Import) and pick that Prometheus.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/dlockotel"
	"github.com/dlock/dlock/dlockotel/dlockprom"
	_ "github.com/dlock/dlock/etcdlock"
	_ "github.com/dlock/dlock/memlock"
	_ "github.com/dlock/dlock/mysqllock"
	_ "github.com/dlock/dlock/natslock"
	_ "github.com/dlock/dlock/pglock"
	_ "github.com/dlock/dlock/redislock"
	_ "github.com/dlock/dlock/zklock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

type config struct {
	backend  string
	addr     string
	workers  int
	locks    int
	maxWait  time.Duration
	work     time.Duration // the longest a job holds its lock
	ttl      time.Duration // the locks' TTL
	duration time.Duration // 0: until interrupted
}

func main() {
	var cfg config
	flag.StringVar(&cfg.backend, "backend", "mem://observability", "backend URL")
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:9464", "listen address of /metrics")
	flag.IntVar(&cfg.workers, "workers", 6, "concurrent workers")
	flag.IntVar(&cfg.locks, "locks", 3, "distinct lock names (fewer than workers: contention)")
	flag.DurationVar(&cfg.maxWait, "max-wait", time.Second, "longest wait for a lock before a job gives up")
	flag.DurationVar(&cfg.work, "work", 300*time.Millisecond, "longest time a job holds its lock")
	flag.DurationVar(&cfg.ttl, "ttl", 5*time.Second, "lock TTL (renewed every TTL/3 while held)")
	flag.DurationVar(&cfg.duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	flag.Parse()
	slog.SetDefault(newLogger(os.Stderr))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "observability:", err)
		os.Exit(1)
	}
	slog.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	if err := run(ctx, cfg, ln, prometheus.DefaultRegisterer, promhttp.Handler()); err != nil {
		fmt.Fprintln(os.Stderr, "observability:", err)
		os.Exit(1)
	}
}

// run serves metrics on ln and runs the workers until ctx ends or
// cfg.duration passes.
func run(ctx context.Context, cfg config, ln net.Listener, reg prometheus.Registerer, metrics http.Handler) error {
	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}
	// Metrics: OpenTelemetry instruments, exported to Prometheus.
	// WithoutScopeInfo drops the otel_scope_* labels the exporter would put
	// on every series: dlock's metrics have one scope, and they only add
	// noise to every query.
	mp, err := dlockprom.MeterProvider(reg, otelprom.WithoutScopeInfo())
	if err != nil {
		return err
	}
	defer mp.Shutdown(context.Background())
	// Traces: over OTLP/gRPC when OTEL_EXPORTER_OTLP_ENDPOINT says where.
	var tpOpts []sdktrace.TracerProviderOption
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return err
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	} else {
		slog.Info("traces are made but not exported: set OTEL_EXPORTER_OTLP_ENDPOINT to send them")
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	defer tp.Shutdown(context.Background())

	// WithLockNames labels every series with the lock's name. The dashboard's
	// "Most contended locks" panel needs it (without it, all locks are one
	// unnamed series), and this example has a few fixed names. Do not copy it
	// where names are unbounded (a lock per order or per request makes one
	// series per name, for ever).
	hooks, err := dlockotel.Hooks(dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(tp), dlockotel.WithLockNames())
	if err != nil {
		return err
	}
	c, err := dlock.Open(ctx, cfg.backend, dlock.WithHooks(hooks))
	if err != nil {
		return err
	}
	defer c.Close()

	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	tracer := tp.Tracer("examples/observability")
	var wg sync.WaitGroup
	for w := range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker(ctx, c, tracer, cfg, w)
		}()
	}
	wg.Wait()
	return nil
}

// worker runs jobs until ctx ends.
func worker(ctx context.Context, c *dlock.Client, tracer trace.Tracer, cfg config, id int) {
	label := fmt.Sprintf("worker-%d", id)
	for ctx.Err() == nil {
		name := fmt.Sprintf("jobs/%d", rand.IntN(cfg.locks))
		jctx, span := tracer.Start(ctx, "job")
		err := dlock.Do(jctx, c.Mutex(name, dlock.WithTTL(cfg.ttl), dlock.WithLabel(label)),
			func(ctx context.Context, l *dlock.Lease) error {
				select { // the work
				case <-time.After(time.Duration(rand.Int64N(int64(cfg.work)))):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}, dlock.MaxWait(cfg.maxWait))
		if err != nil && !errors.Is(err, dlock.ErrNotAcquired) && ctx.Err() == nil {
			slog.Warn("job failed", "worker", label, "lock", name, "err", err)
		}
		span.End()
	}
}

// newLogger logs to w one line per record, in logfmt: a value with line
// breaks (an errors.Join error, a driver's multi-line message) is quoted
// with its breaks escaped, so a log shipper never splits a record.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil))
}
