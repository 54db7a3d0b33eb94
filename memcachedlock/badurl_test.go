package memcachedlock_test

import (
	"strings"
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// A prefix memcached cannot hold in a key was taken at Open, and then every
// Lock failed: it is refused at Open, with the reason. The longest prefix
// taken works: the bound was the lock key's, so prefixes of 212 to 217
// bytes were taken, and every Lock failed on the token counter's key.
func TestBadPrefixIsRefused(t *testing.T) {
	for _, p := range []string{"a%20b", "a%0Ab", "a%09b", strings.Repeat("p", 218), strings.Repeat("p", 212)} {
		drivertest.WantInvalidURL(t, "memcached://127.0.0.1:1?prefix="+p, "", "prefix")
	}
	srv := testserver.Memcached(t)
	c := drivertest.MustOpen(t, "memcached://"+srv.Addr()+"?prefix="+strings.Repeat("p", 211))
	l, err := c.Mutex("longest-prefix").TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock under the longest prefix taken: %v", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A parameter given twice had its first value used, silently.
func TestRepeatedParamIsRefused(t *testing.T) {
	drivertest.WantInvalidURL(t, "memcached://127.0.0.1:1?timeout=1s&timeout=-1s", "", "timeout is given 2 times")
	drivertest.WantInvalidURL(t, "memcached://127.0.0.1:1?prefix=ok&prefix=a%20b", "", "prefix is given 2 times")
}
