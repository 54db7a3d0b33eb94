package memcachedlock_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TestTenantAttacks holds memcached to what the package doc and
// docs/security.md say: it has no rights to grant, so a second "tenant"
// (another prefix) on the same server, through gomemcache, can release a's
// lock by deleting its item, and a's holder then loses its lease. Tenants
// need a memcached each.
func TestTenantAttacks(t *testing.T) {
	srv := testserver.Memcached(t)
	const name = "tenantA/secret"
	_, la := drivertest.MustHoldAs(t, "memcached://"+srv.Addr()+"?prefix=a", name, 3*time.Second)
	sum := sha256.Sum256([]byte(name))
	key := "a:" + hex.EncodeToString(sum[:16])
	b := memcache.New(srv.Addr())
	if _, err := b.Get(key); err != nil {
		t.Fatalf("b reads a's item: %v; the docs say memcached cannot refuse it", err)
	}
	if err := b.Delete(key); err != nil {
		t.Fatalf("b deletes a's item: %v; the docs say memcached cannot refuse it", err)
	}
	select {
	case <-la.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a's lease still live 10s after b deleted its item")
	}
}
