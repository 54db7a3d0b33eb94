package etcdlock

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"go.uber.org/zap"
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
