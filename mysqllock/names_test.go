package mysqllock_test

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

// Distinct names are distinct locks in every mode, or refused. Session
// mode's GET_LOCK names compare case-insensitively, and a name over 64
// characters and "dlock:<first 58 hex of its SHA-256>" were one GET_LOCK.
func TestDistinctNames(t *testing.T) {
	srv := testserver.MariaDB(t)
	testserver.MariaDBURL(t, srv, "dlock")
	for _, mode := range []mysqllock.Mode{mysqllock.ModeTable, mysqllock.ModeRow, mysqllock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			h := &harness{addr: srv.Addr(), mode: mode}
			drivertest.DistinctNames(t, drivertest.Client(t, h), drivertest.Client(t, h), drivertest.NamePairs("distinct-", 2, 40))
		})
	}
}

// FuzzLockName: session mode's GET_LOCK name is a pure function of the
// lock name; two distinct names it accepts never share one.
func FuzzLockName(f *testing.F) {
	long := strings.Repeat("L", 65)
	sum := sha256.Sum256([]byte(long))
	f.Add(long, "dlock:"+hex.EncodeToString(sum[:])[:58])
	f.Add("job", "Job")
	f.Add(strings.Repeat("é", 64), strings.Repeat("é", 65))
	f.Add(strings.Repeat("x", 64), strings.Repeat("x", 64)+"y")
	reserved := regexp.MustCompile(`^dlock:[0-9a-fA-F]{58}$`)
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == b || reserved.MatchString(a) || reserved.MatchString(b) {
			return // one name, or one session mode refuses
		}
		if mysqllock.LockName(a) == mysqllock.LockName(b) {
			t.Fatalf("%q and %q are one GET_LOCK %q", a, b, mysqllock.LockName(a))
		}
	})
}
