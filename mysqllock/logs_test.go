package mysqllock_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// go-sql-driver's own log lines (here, about pooled connections the server
// killed, as after a restart) go to the dlock client's logger, not to the
// process's stderr.
func TestDriverLogsGoToClientLogger(t *testing.T) {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	c, err := dlock.Open(t.Context(), url+"?mode=table", dlock.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	lockOnce := func() {
		t.Helper()
		l, err := c.Mutex(t.Name()).Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	lockOnce() // the pool now has idle connections
	admin, err := newDB(srv.Addr(), "dlock", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var own int64
	if err := admin.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&own); err != nil {
		t.Fatal(err)
	}
	rows, err := admin.QueryContext(t.Context(), "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> ? AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)", own)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		_, _ = admin.ExecContext(t.Context(), fmt.Sprintf("KILL %d", id))
	}
	lockOnce() // finds the killed idle connections, which the driver logs
	if out := buf.String(); !strings.Contains(out, "go-sql-driver") {
		t.Fatalf("no go-sql-driver line in the client's log after its connections were killed:\n%s", out)
	}
}
