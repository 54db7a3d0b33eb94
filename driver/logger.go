package driver

import (
	"context"
	"log/slog"
)

type loggerKey struct{}

// WithLogger returns a copy of ctx that carries l. dlock.Open passes the
// client's logger to OpenDriver this way, so that what a store client built
// from a URL would log goes through it instead of to stderr.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// Logger returns the logger ctx carries, or one that discards everything.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok && l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
