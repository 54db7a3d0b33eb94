package mysqllock_test

import (
	"testing"

	"github.com/dlock/dlock/internal/sqltest"
)

func TestTableFailedReleaseNotReentered(t *testing.T) {
	sqltest.TableFailedReleaseNotReentered(t, sqlBackend(t))
}
