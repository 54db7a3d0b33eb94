package natslock_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/syncbuf"
	"github.com/dlock/dlock/internal/testserver"
)

// A client that closes normally logs no warning: nats.go reports Close's
// own disconnect to the disconnect handler too, with no error.
func TestCloseLogsNoWarning(t *testing.T) {
	url := testserver.NATSInProcess(t)
	var buf syncbuf.Buffer
	c, err := dlock.Open(t.Context(), url, dlock.WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Mutex("close-quietly").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(t.Context())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// nats.go runs its handlers on a goroutine of its own, after Close
	// returns: give it time to.
	for range 50 {
		if out := buf.String(); strings.Contains(out, "level=WARN") {
			t.Fatalf("Close logged a warning:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
