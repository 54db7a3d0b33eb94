// Package dlockotel reports dlock's lock events as OpenTelemetry metrics and
// traces, through the client's hooks:
//
//	h, err := dlockotel.Hooks() // the global MeterProvider and TracerProvider
//	c, err := dlock.Open(ctx, url, dlock.WithHooks(h))
//
// # Metrics
//
// Every instrument carries dlock.backend (the URL scheme) and dlock.lock.kind
// ("exclusive", "shared", "write", "permit"); dlock.lock.name only WithLockNames,
// since lock names can be unbounded (one per order, per user).
//
//	dlock.lock.wait.duration     histogram, s      how long Lock/TryLock waited; dlock.lock.outcome = acquired | refused
//	dlock.lock.hold.duration     histogram, s      how long a hold lasted; dlock.lock.end = released | lost
//	dlock.lock.acquisitions      counter           new holds granted (re-entries are not counted)
//	dlock.lock.refusals          counter           TryLocks that found the lock held, Lock waits that ended without it (contention)
//	dlock.lock.held              up-down counter   holds this process has now
//	dlock.lock.waiting           up-down counter   blocking Lock calls of this process waiting now (sum it over
//	                                               processes for the waiters of a lock, where the store keeps no queue)
//	dlock.lock.renewals          counter           renewals that came back; failed ones carry error.type
//	dlock.lock.renewal.duration  histogram, s      a renewal's round trip; failed ones carry error.type
//	dlock.lock.lost              counter           holds lost, by dlock.lock.lost.cause
//
// Causes of loss: "expired" (a lease past its TTL without a renewal: a fixed
// lease, or a process that could not renew in time), "renewal_refused" (the
// store said the hold was gone: deleted, expired there, or taken), "unconfirmed"
// (renewals failed until the deadline), "session_ended" (etcd lease,
// ZooKeeper session), "reentry" (a re-entry found another hold) and "other".
//
// Through the Prometheus exporter (see package dlockotel/dlockprom) the names
// become dlock_lock_wait_duration_seconds, dlock_lock_acquisitions_total, …
//
// # Traces
//
// Lock, TryLock, Unlock and Extend each make a span (dlock.lock,
// dlock.trylock, dlock.unlock, dlock.extend) that covers the call and is a
// child of the span in the caller's ctx, with dlock.backend,
// dlock.lock.name, dlock.lock.kind and dlock.lock.token. A TryLock that
// finds the lock held is not an error: its span has dlock.lock.outcome =
// refused. Any other failure sets the span's status and error.type.
package dlockotel

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/dlock/dlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of dlockotel's meter and tracer.
const ScopeName = "github.com/dlock/dlock/dlockotel"

// Attribute keys.
const (
	AttrBackend   = attribute.Key("dlock.backend")
	AttrName      = attribute.Key("dlock.lock.name")
	AttrKind      = attribute.Key("dlock.lock.kind")
	AttrToken     = attribute.Key("dlock.lock.token")
	AttrOutcome   = attribute.Key("dlock.lock.outcome")
	AttrEnd       = attribute.Key("dlock.lock.end")
	AttrLostCause = attribute.Key("dlock.lock.lost.cause")
	AttrErrorType = attribute.Key("error.type")
)

// Option configures Hooks.
type Option func(*config)

type config struct {
	mp        metric.MeterProvider
	tp        trace.TracerProvider
	lockNames bool
}

// WithMeterProvider sets the MeterProvider; the default is otel's global one.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets the TracerProvider; the default is otel's global one.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithLockNames adds dlock.lock.name to every metric. Leave it off when lock
// names are unbounded: each name becomes a time series. Spans always carry
// the name.
func WithLockNames() Option { return func(c *config) { c.lockNames = true } }

// durations are the histogram bucket bounds in seconds, from 1 ms (a local
// Redis round trip) to 5 minutes (a long wait for a busy lock).
var durations = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

type instruments struct {
	cfg          config
	tracer       trace.Tracer
	wait, hold   metric.Float64Histogram
	renewLatency metric.Float64Histogram
	acquisitions metric.Int64Counter
	refusals     metric.Int64Counter
	renewals     metric.Int64Counter
	lost         metric.Int64Counter
	held         metric.Int64UpDownCounter
	waiting      metric.Int64UpDownCounter

	mu    sync.Mutex
	holds map[holdKey]int // live holds, by lease count: the held gauge counts holds, not leases
}

type holdKey struct {
	backend, name string
	token         uint64
}

// Hooks returns dlock hooks that record metrics and spans. Use one Hooks
// value per client: it tells holds apart by backend, name and token.
func Hooks(opts ...Option) (dlock.Hooks, error) {
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	m := cfg.mp.Meter(ScopeName)
	in := &instruments{cfg: cfg, tracer: cfg.tp.Tracer(ScopeName), holds: map[holdKey]int{}}
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durations...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	in.wait = hist("dlock.lock.wait.duration", "How long Lock and TryLock calls waited, acquired or refused.")
	in.hold = hist("dlock.lock.hold.duration", "How long holds lasted, released or lost.")
	in.renewLatency = hist("dlock.lock.renewal.duration", "Round trip of lease renewals.")
	in.acquisitions = counter("dlock.lock.acquisitions", "{acquisition}", "New holds granted.")
	in.refusals = counter("dlock.lock.refusals", "{refusal}", "Lock attempts that found the lock held by another owner.")
	in.renewals = counter("dlock.lock.renewals", "{renewal}", "Lease renewals that came back; failed ones carry error.type.")
	in.lost = counter("dlock.lock.lost", "{hold}", "Holds lost, by cause.")
	var err error
	in.held, err = m.Int64UpDownCounter("dlock.lock.held", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds this process has now."))
	errs = append(errs, err)
	in.waiting, err = m.Int64UpDownCounter("dlock.lock.waiting", metric.WithUnit("{call}"),
		metric.WithDescription("Lock calls of this process waiting now (blocking Lock, RLock, Acquire)."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return dlock.Hooks{}, err
	}
	return dlock.Hooks{
		Acquired: in.acquired,
		Refused:  in.refused,
		Released: in.released,
		Renewed:  in.renewed,
		Lost:     in.lostHook,
		Call:     in.call,
	}, nil
}

// attrs are a metric's attributes for e.
func (in *instruments) attrs(backend, name, kind string, more ...attribute.KeyValue) metric.MeasurementOption {
	kv := make([]attribute.KeyValue, 0, 3+len(more))
	kv = append(kv, AttrBackend.String(backend), AttrKind.String(kind))
	if in.cfg.lockNames {
		kv = append(kv, AttrName.String(name))
	}
	return metric.WithAttributes(append(kv, more...)...)
}

func (in *instruments) acquired(ctx context.Context, e dlock.Event) {
	in.wait.Record(ctx, e.Wait.Seconds(), in.attrs(e.Backend, e.Name, e.Kind, AttrOutcome.String("acquired")))
	in.acquisitions.Add(ctx, 1, in.attrs(e.Backend, e.Name, e.Kind))
	in.mu.Lock()
	k := holdKey{e.Backend, e.Name, e.Token}
	_, known := in.holds[k]
	if !known {
		in.holds[k] = 0 // the lease count: the call's end adds this lease
	}
	in.mu.Unlock()
	if !known {
		in.held.Add(ctx, 1, in.attrs(e.Backend, e.Name, e.Kind))
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.Float64("dlock.lock.wait", e.Wait.Seconds()))
}

func (in *instruments) refused(ctx context.Context, e dlock.Event) {
	in.wait.Record(ctx, e.Wait.Seconds(), in.attrs(e.Backend, e.Name, e.Kind, AttrOutcome.String("refused")))
	in.refusals.Add(ctx, 1, in.attrs(e.Backend, e.Name, e.Kind))
}

func (in *instruments) released(ctx context.Context, e dlock.Event) {
	in.mu.Lock()
	k := holdKey{e.Backend, e.Name, e.Token}
	n, known := in.holds[k]
	ended := known && n <= 1
	if ended {
		delete(in.holds, k)
	} else if known {
		in.holds[k] = n - 1
	}
	in.mu.Unlock()
	if ended {
		in.held.Add(ctx, -1, in.attrs(e.Backend, e.Name, e.Kind))
		in.hold.Record(ctx, e.Held.Seconds(), in.attrs(e.Backend, e.Name, e.Kind, AttrEnd.String("released")))
	}
}

func (in *instruments) renewed(ctx context.Context, e dlock.Event) {
	var more []attribute.KeyValue
	if e.Err != nil {
		more = append(more, AttrErrorType.String(errorType(e.Err)))
	}
	in.renewals.Add(ctx, 1, in.attrs(e.Backend, e.Name, e.Kind, more...))
	in.renewLatency.Record(ctx, e.Latency.Seconds(), in.attrs(e.Backend, e.Name, e.Kind, more...))
}

func (in *instruments) lostHook(ctx context.Context, e dlock.Event) {
	in.mu.Lock()
	k := holdKey{e.Backend, e.Name, e.Token}
	_, known := in.holds[k]
	delete(in.holds, k)
	in.mu.Unlock()
	if known {
		in.held.Add(ctx, -1, in.attrs(e.Backend, e.Name, e.Kind))
	}
	in.hold.Record(ctx, e.Held.Seconds(), in.attrs(e.Backend, e.Name, e.Kind, AttrEnd.String("lost")))
	in.lost.Add(ctx, 1, in.attrs(e.Backend, e.Name, e.Kind, AttrLostCause.String(LostCause(e.Err))))
}

// call starts the span of a Lock, TryLock, Unlock or Extend call.
func (in *instruments) call(ctx context.Context, c dlock.Call) (context.Context, func(uint64, error)) {
	attrs := []attribute.KeyValue{AttrBackend.String(c.Backend), AttrName.String(c.Name), AttrKind.String(c.Kind)}
	if c.Token != 0 {
		attrs = append(attrs, AttrToken.Int64(int64(c.Token)))
	}
	ctx, span := in.tracer.Start(ctx, "dlock."+c.Op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	acquire := c.Op == "lock" || c.Op == "trylock"
	if c.Op == "lock" { // a blocking call: waiting until it returns
		in.waiting.Add(ctx, 1, in.attrs(c.Backend, c.Name, c.Kind))
	}
	return ctx, func(token uint64, err error) {
		defer span.End()
		if c.Op == "lock" {
			in.waiting.Add(ctx, -1, in.attrs(c.Backend, c.Name, c.Kind))
		}
		if acquire && err == nil {
			span.SetAttributes(AttrToken.Int64(int64(token)), AttrOutcome.String("acquired"))
			in.mu.Lock()
			k := holdKey{c.Backend, c.Name, token}
			if n, ok := in.holds[k]; ok {
				in.holds[k] = n + 1 // this lease, a first hold or a re-entry
			}
			in.mu.Unlock()
			return
		}
		if err == nil {
			return
		}
		if c.Op == "trylock" && errors.Is(err, dlock.ErrNotAcquired) {
			span.SetAttributes(AttrOutcome.String("refused"))
			return
		}
		if acquire && errors.Is(err, dlock.ErrNotAcquired) {
			span.SetAttributes(AttrOutcome.String("refused"))
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(AttrErrorType.String(errorType(err)))
	}
}

// errorType is a low-cardinality name for err, for error.type.
func errorType(err error) string {
	switch {
	case errors.Is(err, dlock.ErrLeaseLost):
		return "lease_lost"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, dlock.ErrNotAcquired):
		return "not_acquired"
	case errors.Is(err, dlock.ErrNotHeld):
		return "not_held"
	case errors.Is(err, dlock.ErrClosed):
		return "closed"
	case errors.Is(err, dlock.ErrUnsupported):
		return "unsupported"
	case errors.Is(err, dlock.ErrInvalidName), errors.Is(err, dlock.ErrInvalidTTL),
		errors.Is(err, dlock.ErrInvalidOwner), errors.Is(err, dlock.ErrInvalidLabel):
		return "invalid_argument"
	}
	return "_OTHER" // the semantic conventions' fallback value
}

// LostCause names the cause of a loss, for dlock.lock.lost.cause, from the
// error of a Lost event. dlock reports the cause in the error's text only,
// so this reads the texts dlock writes (see the package doc for the values).
func LostCause(err error) string {
	if err == nil {
		return "other"
	}
	s := err.Error()
	switch {
	case strings.Contains(s, "session ended"):
		return "session_ended"
	case strings.Contains(s, "re-entry found"):
		return "reentry"
	case strings.Contains(s, "renewal not confirmed"):
		return "unconfirmed"
	case strings.Contains(s, "expired (TTL"), strings.Contains(s, "not renewed in time"):
		return "expired"
	case errors.Is(err, dlock.ErrLeaseLost):
		return "renewal_refused"
	}
	return "other"
}
