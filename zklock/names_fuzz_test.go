package zklock

import (
	"strings"
	"testing"
)

// FuzzLockPath: a name's node path is a pure function of the name; two
// distinct names it accepts never share a node, and no accepted name's node
// is a child of another's that the latter's lock would take for a
// contender (a phantom holder).
func FuzzLockPath(f *testing.F) {
	for _, p := range [][2]string{
		{"a", "/a"}, {"p", "p/_c_0123-lock-0000000000"}, {"p", "p/lock-0000000001"},
		{"p", "p/_c_x-__READ__0000000001"}, {"a/b", "a//b"}, {"a", "a/"}, {"orders/sku-42", "orders/sku-43"},
	} {
		f.Add(p[0], p[1])
	}
	d := &zkDriver{root: "/app"}
	f.Fuzz(func(t *testing.T, a, b string) {
		pa, errA := d.lockPath(a)
		pb, errB := d.lockPath(b)
		if a == b || errA != nil || errB != nil {
			return
		}
		if pa == pb {
			t.Fatalf("%q and %q share the node %s", a, b, pa)
		}
		for _, pair := range [][2]string{{pa, pb}, {pb, pa}} {
			if child, ok := strings.CutPrefix(pair[1], pair[0]+"/"); ok && !strings.Contains(child, "/") && seq(child) >= 0 {
				t.Fatalf("the node %s passes for a contender of %s", pair[1], pair[0])
			}
		}
	})
}
