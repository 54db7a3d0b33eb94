package etcdlock

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// zapToSlog makes the zap logger etcd's client wants write to l, so that
// what the client logs (retries, endpoint trouble) goes through the dlock
// client's logger.
func zapToSlog(l *slog.Logger) *zap.Logger {
	return zap.New(slogCore{l: l.With("backend", Scheme)})
}

// slogCore is a zapcore.Core over a *slog.Logger.
type slogCore struct {
	l     *slog.Logger
	attrs []slog.Attr // from With
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l < zapcore.InfoLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c slogCore) Enabled(l zapcore.Level) bool {
	return c.l.Enabled(context.Background(), slogLevel(l))
}

func (c slogCore) With(fs []zapcore.Field) zapcore.Core {
	return slogCore{l: c.l, attrs: append(append([]slog.Attr(nil), c.attrs...), attrsOf(fs)...)}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	level := slogLevel(e.Level)
	if cancelled(fs) {
		// A request dlock itself cancelled (a Lock whose ctx ended, the
		// version check's other endpoints once one answered): no warning.
		if level = slog.LevelDebug; !c.l.Enabled(context.Background(), level) {
			return nil
		}
	}
	attrs := append(append([]slog.Attr(nil), c.attrs...), attrsOf(fs)...)
	c.l.LogAttrs(context.Background(), level, "etcdlock: etcd client: "+e.Message, attrs...)
	return nil
}

// cancelled reports whether fs hold the error of a request cancelled by
// its caller's ctx (gRPC's code Canceled).
func cancelled(fs []zapcore.Field) bool {
	for _, f := range fs {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType && status.Code(err) == codes.Canceled {
			return true
		}
	}
	return false
}

func (slogCore) Sync() error { return nil }

func attrsOf(fs []zapcore.Field) []slog.Attr {
	if len(fs) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fs {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	return attrs
}
