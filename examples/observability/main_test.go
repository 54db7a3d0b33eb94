package main

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestWorkersAndDashboard runs the example's workers on a mem store while an
// operator force-releases their locks, scrapes /metrics, and checks the
// figures and that every metric the dashboard queries is served.
func TestWorkersAndDashboard(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := config{backend: "mem://observability-test", workers: 4, locks: 2, maxWait: 200 * time.Millisecond,
		work: 250 * time.Millisecond, ttl: 150 * time.Millisecond, duration: 4 * time.Second}
	done := make(chan error, 1)
	go func() { done <- run(t.Context(), cfg, ln, reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) }()

	// An operator clears the locks now and then: their holders lose them.
	op, err := dlock.Open(t.Context(), cfg.backend)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	for range 10 {
		time.Sleep(200 * time.Millisecond)
		for _, n := range []string{"jobs/0", "jobs/1"} {
			_ = op.ForceUnlock(t.Context(), n)
		}
	}
	fams := scrape(t, "http://"+ln.Addr().String()+"/metrics")
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.HasPrefix(l.GetName(), "otel_scope_") {
					t.Fatalf("%s carries %s: the exporter should be WithoutScopeInfo", name, l.GetName())
				}
			}
		}
	}

	sum := func(name string) float64 {
		var v float64
		for _, m := range fams[name].GetMetric() {
			v += m.GetCounter().GetValue()
		}
		return v
	}
	if a, r := sum("dlock_lock_acquisitions_total"), sum("dlock_lock_refusals_total"); a < 5 || r < 1 {
		t.Errorf("acquisitions %v, refusals %v: want work and contention (4 workers on 2 locks)", a, r)
	}
	if l := sum("dlock_lock_lost_total"); l < 1 {
		t.Errorf("lost %v: want the force-released holds lost", l)
	}

	// Every metric the dashboard queries is served.
	raw, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	re := regexp.MustCompile(`dlock_[a-z_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range re.FindAllString(tg.Expr, -1) {
				if strings.HasPrefix(name, "dlock_backend") || strings.HasPrefix(name, "dlock_lock_name") ||
					strings.HasPrefix(name, "dlock_lock_outcome") || strings.HasPrefix(name, "dlock_lock_end") ||
					strings.HasPrefix(name, "dlock_lock_lost_cause") || strings.HasPrefix(name, "dlock_lock_kind") {
					continue // a label
				}
				used[strings.TrimSuffix(name, "_bucket")] = true
			}
		}
	}
	var missing []string
	for name := range used {
		if fams[name] == nil {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(used) < 7 || len(missing) > 0 {
		t.Errorf("dashboard queries %d metrics; not served: %v", len(used), missing)
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestLogOneLine: an error with line breaks is logged as one line.
func TestLogOneLine(t *testing.T) {
	var b strings.Builder
	newLogger(&b).Warn("job failed", "err", errors.Join(errors.New("first"), errors.New("second")))
	if strings.Count(b.String(), "\n") != 1 || !strings.Contains(b.String(), `first\nsecond`) {
		t.Errorf("logged %q, want one line with the break escaped", b.String())
	}
}
