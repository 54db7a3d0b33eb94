package redislock_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// The alternatives for the uncontended Lock+Unlock that docs/design.md's
// "The Redis fast path" weighs, each as the bare commands it sends (no
// portable layer), beside dlock's own: what each costs the server (the
// commands' own time from INFO commandstats, "srv-µs/op", which other load
// on the machine hardly moves) and the client (this process's CPU time,
// "cpu-µs/op", the loop's own included, and -benchmem).
var (
	// bsm/redislock's shape: a script that sets, a script that compares and deletes.
	altObtain = redis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0`)
	// A string lock that carries its token: one script, three calls.
	altStringAcquire = redis.NewScript(`
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local t = redis.call('INCR', KEYS[2])
if redis.call('SET', KEYS[1], t .. '\0' .. ARGV[1], 'NX', 'PX', ARGV[2]) then return t end
return 0`)
	altStringRelease = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1])
return redis.call('EXISTS', KEYS[3])`)
)

// clientUsec returns the CPU time this process has used, user and system, in µs.
func clientUsec() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// serverUsec returns the total time the server has spent in commands, in µs.
func serverUsec(ctx context.Context, rdb *redis.Client) float64 {
	var total float64
	for _, line := range strings.Split(rdb.Info(ctx, "commandstats").Val(), "\n") {
		_, rest, ok := strings.Cut(line, ",usec=")
		if !ok || strings.HasPrefix(line, "cmdstat_info") {
			continue
		}
		v, _ := strconv.ParseFloat(rest[:strings.IndexByte(rest, ',')], 64)
		total += v
	}
	return total
}

// serverStats returns the commands the server has run, those scripts ran
// included (INFO commandstats, INFO itself left out), and the server
// process's CPU time, user and system, in µs (INFO cpu): the commands and
// the reading, parsing and replying around each. (The commands' own times
// in commandstats would count each command a script runs twice: in the
// script's time and in its own.)
func serverStats(ctx context.Context, rdb *redis.Client) (calls, cpu float64) {
	for _, line := range strings.Split(rdb.Info(ctx, "commandstats", "cpu").Val(), "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f * 1e6
			continue
		}
		if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		n, _ := strconv.ParseFloat(rest[:strings.IndexByte(rest+",", ',')], 64)
		calls += n
	}
	return calls, cpu
}

func BenchmarkAlternatives(b *testing.B) {
	srv := testserver.Redis(b)
	c, rdb := benchClient(b, srv)
	ctx := b.Context()
	val := dlock.NewOwnerID()
	keys := []string{"alt:{n}", "alt:{n}:token", "alt:{n}:queue"}
	run := func(name string, op func() error) {
		b.Run(name, func(b *testing.B) {
			for range 100 { // warm: scripts loaded, connections made
				if err := op(); err != nil {
					b.Fatal(err)
				}
			}
			s0, c0 := serverUsec(ctx, rdb), clientUsec()
			n := 0
			for b.Loop() {
				if err := op(); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric((clientUsec()-c0)/float64(n), "cpu-µs/op")
			b.ReportMetric((serverUsec(ctx, rdb)-s0)/float64(n), "srv-µs/op")
		})
	}
	run("plain", func() error { return plainLockUnlock(ctx, rdb, keys[0], val) })
	run("scripts-set", func() error {
		if err := altObtain.Run(ctx, rdb, keys[:1], val, 30000).Err(); err != nil {
			return err
		}
		return plainDelete.Run(ctx, rdb, keys[:1], val).Err()
	})
	run("native-multi", func() error { // cannot put the token in the value: see design.md
		if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, keys[1])
			p.SetNX(ctx, keys[0], val, 30*time.Second)
			return nil
		}); err != nil {
			return err
		}
		return altStringRelease.Run(ctx, rdb, keys, val).Err()
	})
	run("script-string", func() error {
		t, err := altStringAcquire.Run(ctx, rdb, keys, val, 30000).Int64()
		if err != nil {
			return err
		}
		return altStringRelease.Run(ctx, rdb, keys, strconv.FormatInt(t, 10)+"\x00"+val).Err()
	})
	m := c.Mutex("alt-dlock")
	run("dlock", func() error {
		l, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	})
}
