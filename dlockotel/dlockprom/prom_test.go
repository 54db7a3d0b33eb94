package dlockprom_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/dlockotel"
	"github.com/dlock/dlock/dlockotel/dlockprom"
	"github.com/dlock/dlock/memlock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scrape GETs /metrics as Prometheus would and parses the text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	if ct := expfmt.ResponseFormat(resp.Header); ct.FormatType() != expfmt.TypeTextPlain {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// find returns the metric of family name whose labels include want.
func find(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	t.Fatalf("%s: no series with %v", name, want)
	return nil
}

func TestScrape(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	mp, err := dlockprom.MeterProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Shutdown(ctx)
	h, err := dlockotel.Hooks(dlockotel.WithMeterProvider(mp), dlockotel.WithLockNames())
	if err != nil {
		t.Fatal(err)
	}
	c := memlock.Open(dlock.WithHooks(h))
	defer c.Close()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	m := c.Mutex("jobs/nightly")
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatal(err)
		}
	}
	fams := scrape(t, srv.URL+"/metrics")
	lbl := map[string]string{"dlock_backend": "mem", "dlock_lock_kind": "exclusive", "dlock_lock_name": "jobs/nightly"}
	if g := find(t, fams, "dlock_lock_held", lbl); g.GetGauge().GetValue() != 1 {
		t.Errorf("dlock_lock_held = %v, want 1", g.GetGauge().GetValue())
	}
	if fams["dlock_lock_held"].GetType() != dto.MetricType_GAUGE {
		t.Errorf("dlock_lock_held is a %v", fams["dlock_lock_held"].GetType())
	}
	// The Lock above waited and returned: the waiters gauge is there, at 0.
	if g := find(t, fams, "dlock_lock_waiting", lbl); g.GetGauge().GetValue() != 0 || fams["dlock_lock_waiting"].GetType() != dto.MetricType_GAUGE {
		t.Errorf("dlock_lock_waiting = %v (%v), want a gauge at 0", g.GetGauge().GetValue(), fams["dlock_lock_waiting"].GetType())
	}

	time.Sleep(50 * time.Millisecond)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, srv.URL+"/metrics")
	if c := find(t, fams, "dlock_lock_acquisitions_total", lbl); c.GetCounter().GetValue() != 1 {
		t.Errorf("acquisitions = %v, want 1", c.GetCounter().GetValue())
	}
	if c := find(t, fams, "dlock_lock_refusals_total", lbl); c.GetCounter().GetValue() != 3 {
		t.Errorf("refusals = %v, want 3", c.GetCounter().GetValue())
	}
	if g := find(t, fams, "dlock_lock_held", lbl); g.GetGauge().GetValue() != 0 {
		t.Errorf("dlock_lock_held after unlock = %v, want 0", g.GetGauge().GetValue())
	}
	f := fams["dlock_lock_hold_duration_seconds"]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("dlock_lock_hold_duration_seconds: %v", f)
	}
	hist := find(t, fams, "dlock_lock_hold_duration_seconds", map[string]string{"dlock_lock_end": "released"}).GetHistogram()
	if hist.GetSampleCount() != 1 || hist.GetSampleSum() < 0.05 {
		t.Errorf("hold histogram: count %d sum %v, want 1 and >= 0.05s", hist.GetSampleCount(), hist.GetSampleSum())
	}
	// Cumulative buckets: none below 50ms holds the hold, the first one at or
	// above its duration does.
	var below, above uint64
	for _, b := range hist.GetBucket() {
		if b.GetUpperBound() < 0.05 {
			below += b.GetCumulativeCount()
		} else if b.GetUpperBound() >= hist.GetSampleSum() {
			above = b.GetCumulativeCount()
			break
		}
	}
	if below != 0 || above != 1 {
		t.Errorf("buckets below 50ms hold %d, first bucket past the sum holds %d; want 0 and 1", below, above)
	}
	w := find(t, fams, "dlock_lock_wait_duration_seconds", map[string]string{"dlock_lock_outcome": "refused"}).GetHistogram()
	if w.GetSampleCount() != 3 {
		t.Errorf("refused waits = %d, want 3", w.GetSampleCount())
	}
}
