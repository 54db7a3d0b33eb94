// Package dlockprom serves dlockotel's metrics on a Prometheus /metrics
// endpoint, the usual way for Go services:
//
//	mp, err := dlockprom.MeterProvider(prometheus.DefaultRegisterer)
//	h, err := dlockotel.Hooks(dlockotel.WithMeterProvider(mp))
//	c, err := dlock.Open(ctx, url, dlock.WithHooks(h))
//	http.Handle("/metrics", promhttp.Handler())
//
// # Why OpenTelemetry's Prometheus exporter, not client_golang collectors
//
// dlockotel defines each instrument once, with OpenTelemetry names, units
// and bucket bounds. The exporter turns that one definition into
// Prometheus's: dlock.lock.wait.duration (unit s) becomes the histogram
// dlock_lock_wait_duration_seconds, counters get _total, dots in attribute
// names become underscores (dlock_backend, dlock_lock_kind). Writing
// client_golang collectors as well would define every metric twice and let
// the two drift; with the exporter a service that also ships OTLP sees the
// same series in both. The exporter registers one collector with the
// Registerer it is given, so the process's other client_golang metrics
// (go_*, process_*) share the same /metrics, served by promhttp as usual.
package dlockprom

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// MeterProvider returns an OpenTelemetry MeterProvider whose metrics are
// collected by reg (prometheus.DefaultRegisterer for promhttp.Handler()).
// Pass it to dlockotel.WithMeterProvider. Shut it down when the process
// ends.
func MeterProvider(reg prometheus.Registerer, opts ...otelprom.Option) (*sdkmetric.MeterProvider, error) {
	exp, err := otelprom.New(append([]otelprom.Option{otelprom.WithRegisterer(reg)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("dlockprom: prometheus exporter: %w", err)
	}
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)), nil
}
