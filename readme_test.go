//lint:file-ignore SA4006 the README's blocks show the calls, not each error's handling: they are kept verbatim
//lint:file-ignore SA5001 the README's first block defers Close at once, as a reader writes it

package dlock_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/dlockotel"
	"github.com/dlock/dlock/dlockotel/dlockprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Every Go block of the README is here, verbatim, in a function that the
// compiler checks (TestReadmeBlocks finds each block in this file), and the
// first, which reads as one sequence, is run.

// sold counts sell's runs: the first block's Do must have run it.
var sold int

// The blocks that are compiled, not run.
var _ = []any{readmeMetrics, readmeKinds, readmeElection, readmeLockAll}

// The README's helpers: what the reader's program would do.
func write(...any)                               { /* to the fenced resource */ }
func sell(context.Context) error                 { sold++; return nil }
func report(context.Context, *dlock.Lease) error { return nil }
func schedule(context.Context, uint64) error     { return nil }
func show(dlock.Leader, error)                   {}

func readmeFirst(ctx context.Context) error {
	c, err := dlock.Open(ctx, "mem://") // the URL scheme picks the backend
	defer c.Close()                     // releases every lease the client holds

	m := c.Mutex("orders/sku-42", dlock.WithTTL(10*time.Second))
	lease, err := m.Lock(ctx) // ctx bounds the wait only
	write(lease.Token())      // the resource rejects lower tokens
	err = lease.Unlock(ctx)   // free it, or Do below would wait on it (5 s, then fail)

	err = dlock.Do(ctx, m, func(ctx context.Context, l *dlock.Lease) error {
		return sell(ctx) // ctx is cancelled if the lease is lost; a nested Do of m re-enters
	}, dlock.MaxWait(5*time.Second)) // wait at most 5 s; the work runs as long as it needs
	err = dlock.Do(ctx, m, report, dlock.TryOnce()) // cron: skip (ErrNotAcquired) if another run is busy
	return err
}

func readmeMetrics(ctx context.Context, url string) {
	mp, _ := dlockprom.MeterProvider(prometheus.DefaultRegisterer) // OpenTelemetry's Prometheus exporter
	h, _ := dlockotel.Hooks(dlockotel.WithMeterProvider(mp))       // + dlockotel.WithTracerProvider(tp)
	c, _ := dlock.Open(ctx, url, dlock.WithHooks(h))
	http.Handle("/metrics", promhttp.Handler()) // dlock_lock_wait_duration_seconds, dlock_lock_lost_total, …
	_ = c
}

func readmeKinds(ctx context.Context, c *dlock.Client) {
	rw := c.RWMutex("reports/2026-11")  // readers together, a writer alone
	r, err := rw.RLock(ctx)             // also TryRLock, Lock, TryLock; rw.RLocker() for Do
	s := c.Semaphore("payments-api", 5) // at most 5 holders at once
	p, err := s.Acquire(ctx)            // also TryAcquire; s.Locker() for Do
	info, err := rw.Inspect(ctx)        // Holders: readers and writer; also s.Inspect
	_, _, _, _ = r, p, info, err
}

func readmeElection(ctx context.Context, c *dlock.Client) {
	e := c.Election("billing/scheduler", dlock.WithTTL(10*time.Second))
	term, err := e.Campaign(ctx, "host-a:8080") // blocks until this candidate leads
	write(term.Token())                         // the term: strictly greater than every earlier one
	<-term.Done()                               // the term ends as a lease does: Resign, Close, or loss
	err = term.Proclaim(ctx, "host-a:9090")     // new value, same term (etcd only; see below)
	err = term.Resign(ctx)                      // hand over at once

	l, err := e.Leader(ctx)              // l.Value, l.Label, l.Term; ErrNoLeader when none
	for l, err := range e.Observe(ctx) { // each new leader once, in term order
		show(l, err)
	}
	err = e.Lead(ctx, "host-a", func(ctx context.Context, t *dlock.Term) error {
		return schedule(ctx, t.Token()) // runs only while leading: ctx is cancelled if the term is lost
	})
	_, _ = l, err
}

func readmeLockAll(ctx context.Context, c *dlock.Client) {
	g, err := dlock.LockAll(ctx, c.Mutex("stock/segment-7"), c.Mutex("stock/segment-2")) // all or none
	defer g.Unlock(context.WithoutCancel(ctx))
	for _, l := range g.Leases() { // in the order given
		write(l.Name(), l.Token())
	}
	<-g.Done()                                              // closes when any member is lost
	ms := []dlock.NamedLocker{c.Mutex("a"), c.RWMutex("b")} // a []*dlock.Mutex does not convert: declare NamedLockers
	g, err = dlock.TryLockAll(ctx, ms...)                   // ErrNotAcquired if any is held; nothing left taken
	_ = err
}

// TestReadmeBlocks finds every ```go block of the README in this file, so
// that each one is compiled; and runs the first, which must not block on
// itself.
func TestReadmeBlocks(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	norm := func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if l = strings.Join(strings.Fields(l), " "); l != "" {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	body := norm(string(self))
	blocks := strings.Split(string(readme), "```go\n")[1:]
	if len(blocks) < 5 {
		t.Fatalf("%d Go blocks in the README, want at least 5", len(blocks))
	}
	for i, b := range blocks {
		b, _, _ = strings.Cut(b, "```")
		if !strings.Contains(body, norm(b)) {
			t.Errorf("README Go block %d is not compiled here: copy it into a function of readme_test.go\n%s", i+1, b)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	sold = 0
	if err := readmeFirst(ctx); err != nil || sold != 1 {
		t.Errorf("the README's first block, run as written: %v, sell ran %d times; want nil and once", err, sold)
	}
}
