package memcachedlock_test

import (
	"strings"
	"testing"

	"github.com/dlock/dlock/drivertest"
)

// A prefix memcached cannot hold in a key was taken at Open, and then every
// Lock failed: it is refused at Open, with the reason.
func TestBadPrefixIsRefused(t *testing.T) {
	for _, p := range []string{"a%20b", "a%0Ab", "a%09b", strings.Repeat("p", 218)} {
		drivertest.WantInvalidURL(t, "memcached://127.0.0.1:1?prefix="+p, "", "prefix")
	}
}
