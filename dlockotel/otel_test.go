package dlockotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/dlockotel"
	"github.com/dlock/dlock/memlock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup returns a mem client instrumented with real SDK providers.
func setup(t *testing.T, opts ...dlockotel.Option) (*dlock.Client, *sdkmetric.ManualReader, *tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h, err := dlockotel.Hooks(append([]dlockotel.Option{dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	c := memlock.Open(dlock.WithHooks(h))
	t.Cleanup(func() {
		c.Close()
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	return c, reader, rec, tp
}

type points struct {
	sums  map[string]int64   // counter and up-down counter values by metric and attribute set
	hists map[string]uint64  // histogram counts
	hsum  map[string]float64 // histogram sums
	units map[string]string
}

func collect(t *testing.T, r *sdkmetric.ManualReader) points {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	p := points{map[string]int64{}, map[string]uint64{}, map[string]float64{}, map[string]string{}}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != dlockotel.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			p.units[m.Name] = m.Unit
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					p.sums[m.Name+key(dp.Attributes)] += dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					p.hists[m.Name+key(dp.Attributes)] += dp.Count
					p.hsum[m.Name+key(dp.Attributes)] += dp.Sum
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return p
}

// key renders an attribute set as {k=v,...} in key order.
func key(s attribute.Set) string {
	out := "{"
	for i, kv := range s.ToSlice() {
		if i > 0 {
			out += ","
		}
		out += string(kv.Key) + "=" + kv.Value.String()
	}
	return out + "}"
}

// ser names a series: the metric and its attributes beyond backend and kind
// ("k=v,k=v"), in the order collect renders them.
func ser(name, more string) string {
	kv := []attribute.KeyValue{dlockotel.AttrBackend.String("mem"), dlockotel.AttrKind.String("exclusive")}
	if more != "" {
		for _, p := range strings.Split(more, ",") {
			k, v, _ := strings.Cut(p, "=")
			kv = append(kv, attribute.String(k, v))
		}
	}
	return name + key(attribute.NewSet(kv...))
}

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	c, reader, _, _ := setup(t)
	m := c.Mutex("orders/1", dlock.WithTTL(time.Second))

	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	_, err = m.Lock(wctx) // waits, then gives up
	cancel()
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Lock with a short ctx: %v", err)
	}
	// A re-entry through the lease's ctx adds a lease, not a hold.
	inner, err := m.Lock(dlock.ContextWithLease(ctx, l))
	if err != nil {
		t.Fatal(err)
	}
	p := collect(t, reader)
	if got := p.sums[ser("dlock.lock.held", "")]; got != 1 {
		t.Errorf("held with a hold and its re-entry = %d, want 1", got)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	p = collect(t, reader)
	if got := p.sums[ser("dlock.lock.held", "")]; got != 1 {
		t.Errorf("held after the re-entry's unlock = %d, want 1", got)
	}
	time.Sleep(700 * time.Millisecond) // the watchdog renews at TTL/3
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	p = collect(t, reader)
	want := map[string]int64{
		ser("dlock.lock.acquisitions", ""): 1,
		ser("dlock.lock.refusals", ""):     2,
		ser("dlock.lock.held", ""):         0,
	}
	for k, v := range want {
		if got, ok := p.sums[k]; !ok || got != v {
			t.Errorf("%s = %d (present %v), want %d", k, got, ok, v)
		}
	}
	if n := p.sums[ser("dlock.lock.renewals", "")]; n < 1 {
		t.Errorf("renewals = %d, want at least 1 in 700ms of a 1s TTL", n)
	}
	if n := p.hists[ser("dlock.lock.renewal.duration", "")]; int64(n) != p.sums[ser("dlock.lock.renewals", "")] {
		t.Errorf("renewal.duration count %d != renewals %d", n, p.sums[ser("dlock.lock.renewals", "")])
	}
	if n := p.hists[ser("dlock.lock.wait.duration", "dlock.lock.outcome=acquired")]; n != 1 {
		t.Errorf("acquired waits = %d, want 1", n)
	}
	if n := p.hists[ser("dlock.lock.wait.duration", "dlock.lock.outcome=refused")]; n != 2 {
		t.Errorf("refused waits = %d, want 2", n)
	}
	// The Lock that gave up waited about 150ms: the refused waits sum to at least that.
	if s := p.hsum[ser("dlock.lock.wait.duration", "dlock.lock.outcome=refused")]; s < 0.14 {
		t.Errorf("refused wait sum = %vs, want >= 0.14s", s)
	}
	if n := p.hists[ser("dlock.lock.hold.duration", "dlock.lock.end=released")]; n != 1 {
		t.Errorf("released holds = %d, want 1 (the re-entry is not a hold)", n)
	}
	if s := p.hsum[ser("dlock.lock.hold.duration", "dlock.lock.end=released")]; s < 0.8 {
		t.Errorf("hold duration = %vs, want >= 0.8s (150ms wait + 700ms sleep)", s)
	}
	for name, unit := range map[string]string{
		"dlock.lock.wait.duration": "s", "dlock.lock.hold.duration": "s", "dlock.lock.renewal.duration": "s",
		"dlock.lock.acquisitions": "{acquisition}", "dlock.lock.held": "{hold}",
	} {
		if p.units[name] != unit {
			t.Errorf("%s unit %q, want %q", name, p.units[name], unit)
		}
	}
	for k := range p.sums {
		if strings.Contains(k, "orders/1") {
			t.Errorf("lock name in a metric without WithLockNames: %s", k)
		}
	}
}

func TestLostByCause(t *testing.T) {
	ctx := context.Background()
	c, reader, _, _ := setup(t, dlockotel.WithLockNames())
	// A fixed lease runs out: expired.
	fixed, err := c.Mutex("fixed", dlock.WithTTL(100*time.Millisecond), dlock.WithoutRenewal()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// An operator deletes a renewing lease: the next renewal is refused.
	renewing, err := c.Mutex("renewing", dlock.WithTTL(300*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ForceUnlock(ctx, "renewing"); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*dlock.Lease{fixed, renewing} {
		select {
		case <-l.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not lost", l.Name())
		}
	}
	// Done closes first, then the Lost hook records: wait for both losses.
	lostKey := func(cause, name string) string {
		return ser("dlock.lock.lost", "dlock.lock.lost.cause="+cause+",dlock.lock.name="+name)
	}
	p := collect(t, reader)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); p = collect(t, reader) {
		if p.sums[lostKey("expired", "fixed")] == 1 && p.sums[lostKey("renewal_refused", "renewing")] == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for k, v := range map[string]int64{
		ser("dlock.lock.lost", "dlock.lock.lost.cause=expired,dlock.lock.name=fixed"):            1,
		ser("dlock.lock.lost", "dlock.lock.lost.cause=renewal_refused,dlock.lock.name=renewing"): 1,
		ser("dlock.lock.held", "dlock.lock.name=fixed"):                                          0,
		ser("dlock.lock.held", "dlock.lock.name=renewing"):                                       0,
		ser("dlock.lock.renewals", "dlock.lock.name=renewing,error.type=lease_lost"):             1,
	} {
		if got, ok := p.sums[k]; !ok || got != v {
			t.Errorf("%s = %d (present %v), want %d; have %v", k, got, ok, v, p.sums)
		}
	}
	if n := p.hists[ser("dlock.lock.hold.duration", "dlock.lock.end=lost,dlock.lock.name=fixed")]; n != 1 {
		t.Errorf("lost hold durations = %d, want 1", n)
	}
}

func TestSpans(t *testing.T) {
	ctx := context.Background()
	c, _, rec, tp := setup(t)
	ctx, parent := tp.Tracer("test").Start(ctx, "handler")
	m := c.Mutex("orders/2")
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v", err)
	}
	parent.End()

	spans := rec.Ended()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	want := []string{"dlock.lock", "dlock.trylock", "dlock.extend", "dlock.unlock", "dlock.unlock", "handler"}
	if len(names) != len(want) {
		t.Fatalf("spans %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("spans %v, want %v", names, want)
		}
	}
	for _, s := range spans[:5] {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("%s: not a child of the caller's span", s.Name())
		}
		a := attrs(s)
		if a["dlock.backend"] != "mem" || a["dlock.lock.name"] != "orders/2" || a["dlock.lock.kind"] != "exclusive" {
			t.Errorf("%s: attributes %v", s.Name(), a)
		}
		if s.Name() != "dlock.trylock" && a["dlock.lock.token"] != l.Token() {
			t.Errorf("%s: token %v, want %d", s.Name(), a["dlock.lock.token"], l.Token())
		}
	}
	if a := attrs(spans[1]); a["dlock.lock.outcome"] != "refused" || spans[1].Status().Code == codes.Error {
		t.Errorf("refused TryLock span: %v, status %v", a, spans[1].Status())
	}
	if spans[3].Status().Code != codes.Unset {
		t.Errorf("Unlock span status %v", spans[3].Status())
	}
	if a := attrs(spans[4]); spans[4].Status().Code != codes.Error || a["error.type"] != "not_held" {
		t.Errorf("second Unlock span: status %v, attributes %v", spans[4].Status(), a)
	}
	// The Lock span covers the call: it starts before and ends after the grant.
	if !spans[0].StartTime().Before(spans[0].EndTime()) {
		t.Errorf("lock span does not cover a duration")
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[string]any {
	a := map[string]any{}
	for _, kv := range s.Attributes() {
		switch kv.Value.Type() {
		case attribute.INT64:
			a[string(kv.Key)] = uint64(kv.Value.AsInt64())
		default:
			a[string(kv.Key)] = kv.Value.String()
		}
	}
	return a
}

// TestWaitingGauge: dlock.lock.waiting counts the Lock calls waiting now,
// with the usual bounded attributes (the name only WithLockNames).
func TestWaitingGauge(t *testing.T) {
	ctx := context.Background()
	c, reader, _, _ := setup(t)
	m := c.Mutex("orders/2")
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, reader).sums[ser("dlock.lock.waiting", "")]; got != 0 {
		t.Errorf("waiting with nobody waiting = %d, want 0", got)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Mutex("orders/2").Lock(wctx)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got := collect(t, reader).sums[ser("dlock.lock.waiting", "")]; got == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("waiting = %d while a Lock waits, want 1", got)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("waiter: %v", err)
	}
	p := collect(t, reader)
	if got := p.sums[ser("dlock.lock.waiting", "")]; got != 0 {
		t.Errorf("waiting after the waiter gave up = %d, want 0", got)
	}
	if p.units["dlock.lock.waiting"] != "{call}" {
		t.Errorf("unit %q", p.units["dlock.lock.waiting"])
	}
	for k := range p.sums {
		if strings.Contains(k, "orders/2") {
			t.Errorf("lock name in a metric without WithLockNames: %s", k)
		}
	}
	_ = l.Unlock(ctx)
}
