package mysqllock_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// logLines is a log writer that keeps each line, up to its capacity.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}

// go-sql-driver's own log lines (here, about pooled connections the server
// killed, as after a restart) go to the dlock client's logger, not to the
// process's stderr.
func TestDriverLogsGoToClientLogger(t *testing.T) {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	lines := make(logLines, 256)
	log := slog.New(slog.NewTextHandler(lines, nil))
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
	var out []string
	for len(lines) > 0 { // lines stays open: the client may log until it is closed
		l := <-lines
		if strings.Contains(l, "go-sql-driver") {
			return
		}
		out = append(out, l)
	}
	t.Fatalf("no go-sql-driver line in the client's log after its connections were killed:\n%s", strings.Join(out, ""))
}
