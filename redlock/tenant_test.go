package redlock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// TestTenantAttacks: on three masters, tenant a has the doc's grant for
// prefix dlock and tenant b the same grant for prefix b. Through go-redis,
// on every master, b's user can neither read, take, release nor keep alive
// a's lock, run a script of its own, or publish on a's channels; a's lease
// lives on.
func TestTenantAttacks(t *testing.T) {
	addrs := aclNodes(t, 3, "ta", "pa")
	ctx := t.Context()
	for _, addr := range addrs {
		admin := redis.NewClient(&redis.Options{Addr: addr})
		var args []any
		for _, a := range docGrant(t, "tb", "pb") {
			if s, ok := a.(string); ok {
				a = strings.NewReplacer("~dlock:*", "~b:*", "&dlock:*", "&b:*").Replace(s)
			}
			args = append(args, a)
		}
		err := admin.Do(ctx, args...).Err()
		_ = admin.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	const name = "tenantA/secret"
	a, la := drivertest.MustHoldAs(t, "redlock://ta:pa@"+strings.Join(addrs, ","), name, 10*time.Second)
	lib, _ := redisnode.Library()
	lock := "dlock:{" + name + "}"
	for _, addr := range addrs {
		b := redis.NewClient(&redis.Options{Addr: addr, Username: "tb", Password: "pb"})
		for _, cmd := range [][]any{
			{"SCAN", 0}, {"HGETALL", lock},
			{"FCALL", lib + "_force", 4, lock, lock + ":token", lock + ":queue", lock + ":queueinfo"},
			{"DEL", lock}, {"PEXPIRE", lock, 3600000},
			{"EVAL", "while true do end", 0}, {"FUNCTION", "FLUSH"},
			{"PUBLISH", lock + ":released", "r"},
		} {
			if err := b.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
				t.Errorf("%v as b on %s: %v; want NOPERM", cmd[:2], addr, err)
			}
		}
		_ = b.Close()
	}
	drivertest.WantKept(t, a, la, name, 10*time.Second)
}
