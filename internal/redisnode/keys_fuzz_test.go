package redisnode

import (
	"testing"

	"github.com/dlock/dlock/driver"
)

// FuzzKeys: a lock's keys are a pure function of its name; two distinct
// names never share a key, whatever kinds of lock they are used for.
func FuzzKeys(f *testing.F) {
	for _, p := range [][2]string{{"a", "a}"}, {"a%7D", "a}"}, {"a}:token", "a"}, {"{a}", "a"}, {"a:rw", "a"}, {"x", "X"}} {
		f.Add(p[0], p[1])
	}
	kinds := []driver.Kind{driver.Exclusive, driver.Shared, driver.Permit}
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == b {
			return
		}
		keysOf := func(name string) []string {
			var keys []string
			for _, kind := range kinds {
				k := NewKindKeys("dlock", name, kind)
				keys = append(keys, k.all()...)
				if k.chann != "" {
					keys = append(keys, k.chann)
				}
			}
			return keys
		}
		seen := map[string]bool{}
		for _, key := range keysOf(a) {
			seen[key] = true
		}
		for _, key := range keysOf(b) {
			if seen[key] {
				t.Fatalf("%q and %q share the key %q", a, b, key)
			}
		}
	})
}
