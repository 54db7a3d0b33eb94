package etcdlock

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What etcd's client logs through zap reaches the dlock client's slog
// logger, with its level, message and fields.
func TestClientLogsGoToSlog(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	z := zapToSlog(l).With(zap.String("endpoint", "127.0.0.1:2379"))
	z.Debug("below the level")
	z.Warn("retrying of unary invoker failed", zap.Int("attempt", 2))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("want exactly one JSON record, got %q: %v", buf.String(), err)
	}
	want := map[string]any{"level": "WARN", "msg": "etcdlock: etcd client: retrying of unary invoker failed",
		"backend": "etcd", "endpoint": "127.0.0.1:2379", "attempt": float64(2)}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("record %s = %v; want %v (record %v)", k, rec[k], v, rec)
		}
	}
}

// A request dlock cancelled itself is logged at debug, not as a warning:
// the version check cancels the other endpoints' once one answered.
func TestCancelledRequestIsNoWarning(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	z := zapToSlog(l)
	z.Warn("retrying of unary invoker failed", zap.Error(status.Error(codes.Canceled, "context canceled")))
	if buf.Len() != 0 {
		t.Errorf("a cancelled request logged %q at info and above", buf.String())
	}
	z.Warn("retrying of unary invoker failed", zap.Error(status.Error(codes.Unavailable, "no route")))
	if !bytes.Contains(buf.Bytes(), []byte(`"level":"WARN"`)) {
		t.Errorf("an unavailable endpoint logged %q; want a warning", buf.String())
	}
}
