package pglock

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// An acquire transaction is tried again after a deadlock, and after its
// grant found the owner's expired hold still in the way (its clean-up ran
// a moment before the hold expired); nothing else is retried.
func TestRetryable(t *testing.T) {
	for code, want := range map[string]bool{"40P01": true, "23505": true, "40001": false, "57014": false, "42P01": false} {
		err := fmt.Errorf("pglock: acquire: %w", &pgconn.PgError{Code: code})
		if got := retryable(err); got != want {
			t.Errorf("SQLSTATE %s: retryable %v, want %v", code, got, want)
		}
	}
	if retryable(errors.New("connection reset")) {
		t.Error("a non-PostgreSQL error is retryable")
	}
}
