package etcdlock_test

import (
	"strings"
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Distinct names are distinct locks (keys are the prefix and the name as
// given, byte for byte), except for the one layout limit the package doc
// states: a name followed by "/" starts the keys of the names under it, so
// "a" queues behind the holders of "a/b" (and of "a/"), as etcd's own Mutex
// and etcdctl lock do. Those pairs are left out here, and listed.
func TestDistinctNames(t *testing.T) {
	u := "etcd://" + testserver.Etcd(t).Addr()
	var pairs [][2]string
	for _, p := range drivertest.NamePairs("distinct-", 4, 40) {
		if strings.HasPrefix(p[1], p[0]+"/") || strings.HasPrefix(p[0], p[1]+"/") {
			t.Logf("left out (hierarchical, see the package doc): %q and %q", p[0], p[1])
			continue
		}
		pairs = append(pairs, p)
	}
	drivertest.DistinctNames(t, drivertest.MustOpen(t, u), drivertest.MustOpen(t, u), pairs)
}
