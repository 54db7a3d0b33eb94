package redisnode

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
)

// Owner ids (WithOwner) and labels (WithLabel) are the user's: the scripts
// keep them as data, never as Lua patterns or as the separators of a
// queue place ("expiry|ttl|…|channel owner NUL label") or of a kind's hold
// record ("count|token|requests|label"), whatever they hold within the
// bounds dlock checks (1 to 256 bytes of UTF-8 without NUL; a label may be
// empty). Each pair below goes through a queue and a handoff, Inspect, a
// re-entry, a renewal and the releases, on every kind of lock, with FCALL
// and with EVAL.
func TestOwnersAndLabelsAreData(t *testing.T) {
	_, ns := nodes(t)
	ctx := t.Context()
	owners := []string{"%d+|.*[-", "a b", "1|2|3|x", " ", "\n%S+\t", strings.Repeat("%", 256), "é€😀", "-1", "\x01t"}
	labels := []string{"", "%|%d|(.*)$", "a\nb", strings.Repeat("|", 256), "\x7f"}
	for mode, n := range ns {
		for i, owner := range owners {
			label := labels[i%len(labels)]
			for _, kind := range []driver.Kind{driver.Exclusive, driver.Write, driver.Shared, driver.Permit} {
				name := mode + "-owner-" + owner + "-" + kind.String()
				k := NewKindKeys(n.prefix, name, kind)
				hk := k // the holder the request queues behind
				if kind == driver.Shared {
					hk = NewKindKeys(n.prefix, name, driver.Write)
				}
				h, err := n.Acquire(ctx, hk, "holder", "", time.Minute, 1, n.NewRequest(), "")
				if err != nil || !h.Acquired {
					t.Fatalf("%q: holder: %+v, %v", name, h, err)
				}
				req := n.NewRequest()
				if q, err := n.Acquire(ctx, k, owner, label, time.Minute, 1, req, "handoffs"); err != nil || q.Acquired {
					t.Fatalf("%q: queue: %+v, %v; want a place in the queue", name, q, err)
				}
				if _, err := n.releaseReq(ctx, hk, "holder", h.Token, 1, false, n.NewRequest()); err != nil {
					t.Fatalf("%q: holder's release: %v", name, err)
				}
				g, err := n.Acquire(ctx, k, owner, label, time.Minute, 1, req, "handoffs")
				if err != nil || !g.Acquired {
					t.Fatalf("%q: the handoff's proof: %+v, %v", name, g, err)
				}
				var info driver.Info
				if kind == driver.Exclusive {
					info, err = n.Inspect(ctx, name)
				} else {
					info, err = n.InspectKind(ctx, name, kind)
				}
				if err != nil || info.Owner != owner || info.Label != label || info.Token != g.Token {
					t.Errorf("%q: inspect: %+v, %v; want owner %q, label %q, token %d", name, info, err, owner, label, g.Token)
				}
				if g2, err := n.Acquire(ctx, k, owner, "another", time.Minute, 1, n.NewRequest(), ""); err != nil || g2.Holds != 2 {
					t.Fatalf("%q: re-entry: %+v, %v", name, g2, err)
				}
				if errs := n.RenewMany(ctx, []Hold{{Name: name, Owner: owner, Token: g.Token, TTL: time.Minute, Keys: k}}); errs[0] != nil {
					t.Fatalf("%q: renew: %v", name, errs[0])
				}
				for left := 1; left >= 0; left-- {
					if got, err := n.releaseReq(ctx, k, owner, g.Token, 1, false, n.NewRequest()); err != nil || got != left {
						t.Fatalf("%q: release: %d left, %v; want %d", name, got, err, left)
					}
				}
			}
		}
	}
}
