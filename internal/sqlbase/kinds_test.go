package sqlbase

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
)

func TestDecide(t *testing.T) {
	read := func(o string) driver.Request { return driver.Request{Owner: o, Kind: driver.Shared, TTL: time.Second} }
	write := func(o string) driver.Request { return driver.Request{Owner: o, Kind: driver.Write, TTL: time.Second} }
	permit := func(o string, n int) driver.Request {
		return driver.Request{Owner: o, Kind: driver.Permit, Limit: n, TTL: time.Second}
	}
	r := func(o string) KindHold { return KindHold{Owner: o, Kind: driver.Shared, Holds: 1} }
	w := func(o string) KindHold { return KindHold{Owner: o, Kind: driver.Write, Holds: 1} }
	p := func(o string) KindHold { return KindHold{Owner: o, Kind: driver.Permit, Holds: 1} }
	rw := func(o string, seq uint64) KindWait { return KindWait{Owner: o, Kind: driver.Shared, Seq: seq} }
	ww := func(o string, seq uint64) KindWait { return KindWait{Owner: o, Kind: driver.Write, Seq: seq} }
	for _, tc := range []struct {
		name  string
		req   driver.Request
		holds []KindHold
		waits []KindWait
		limit int
		want  Verdict
	}{
		{"read, free", read("a"), nil, nil, 0, Grant},
		{"read beside readers", read("a"), []KindHold{r("b"), r("c")}, nil, 0, Grant},
		{"read under a writer", read("a"), []KindHold{w("b")}, nil, 0, Refuse},
		{"new read behind a waiting writer", read("a"), []KindHold{r("b")}, []KindWait{ww("w", 5)}, 0, Refuse},
		{"read waiting before the writer", read("a"), []KindHold{r("b")}, []KindWait{rw("a", 4), ww("w", 5)}, 0, Grant},
		{"read behind waiting readers only", read("a"), []KindHold{r("b")}, []KindWait{rw("c", 1)}, 0, Grant},
		{"read re-entry past a waiting writer", read("b"), []KindHold{r("b")}, []KindWait{ww("w", 5)}, 0, Reenter},
		{"write, free", write("a"), nil, nil, 0, Grant},
		{"write beside a reader", write("a"), []KindHold{r("b")}, nil, 0, Refuse},
		{"write beside a writer", write("a"), []KindHold{w("b")}, nil, 0, Refuse},
		{"write behind an earlier reader", write("a"), nil, []KindWait{rw("b", 1), ww("a", 2)}, 0, Refuse},
		{"write ahead of a later reader", write("a"), nil, []KindWait{ww("a", 1), rw("b", 2)}, 0, Grant},
		{"new write behind any waiter", write("a"), nil, []KindWait{rw("b", 9)}, 0, Refuse},
		{"write re-entry", write("a"), []KindHold{w("a")}, nil, 0, Reenter},
		{"read under own write", read("a"), []KindHold{w("a")}, nil, 0, KindHeld},
		{"permit, free", permit("a", 2), nil, nil, 0, Grant},
		{"permit with room", permit("a", 2), []KindHold{p("b")}, nil, 2, Grant},
		{"permit, all held", permit("a", 2), []KindHold{p("b"), p("c")}, nil, 2, Refuse},
		{"permit, other count", permit("a", 3), []KindHold{p("b")}, nil, 2, Mismatch},
		{"permit, other count, no holds", permit("a", 3), nil, nil, 2, Grant},
		{"permit re-entry", permit("b", 2), []KindHold{p("b"), p("c")}, nil, 2, Reenter},
		// Summaries (pglock): the others' holds of a kind in one entry.
		{"permit, all held, summed", permit("a", 3), []KindHold{{Kind: driver.Permit, Owners: 3}}, nil, 3, Refuse},
		{"permit with room, summed", permit("a", 4), []KindHold{{Kind: driver.Permit, Owners: 3}}, nil, 4, Grant},
		{"permit re-entry beside a sum", permit("b", 3), []KindHold{p("b"), {Kind: driver.Permit, Owners: 2}}, nil, 3, Reenter},
		{"permit, own and summed fill it", permit("a", 3), []KindHold{p("b"), {Kind: driver.Permit, Owners: 2}}, nil, 3, Refuse},
		{"write beside summed readers", write("a"), []KindHold{{Kind: driver.Shared, Owners: 40}}, nil, 0, Refuse},
		{"read behind the first waiting writer of a sum", read("a"), nil, []KindWait{rw("a", 7), {Kind: driver.Write, Seq: 5}}, 0, Refuse},
		{"read ahead of the first waiting writer of a sum", read("a"), nil, []KindWait{rw("a", 4), {Kind: driver.Write, Seq: 5}}, 0, Grant},
	} {
		if got := Decide(tc.req, tc.holds, tc.waits, tc.limit); got != tc.want {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestRetry(t *testing.T) {
	req := driver.Request{Kind: driver.Write, TTL: 10 * time.Second}
	if got := Retry(req, []KindHold{{TTLLeft: 5 * time.Second}}); got != WaitRecord/2 {
		t.Errorf("Retry of a waiting writer = %v; want half a record's life, %v", got, WaitRecord/2)
	}
	if got := Retry(req, []KindHold{{TTLLeft: 300 * time.Millisecond}}); got != 300*time.Millisecond {
		t.Errorf("Retry = %v; want the first hold's end", got)
	}
	p := driver.Request{Kind: driver.Permit, TTL: 10 * time.Second}
	if got := Retry(p, []KindHold{{TTLLeft: 5 * time.Second}}); got != 5*time.Second {
		t.Errorf("Retry of a permit = %v; want the first hold's end", got)
	}
}

// AcquireKind tries again after a deadlock, three times at most, and only
// after one; it wraps a failure with the backend's mapping, and refuses a
// Mismatch or KindHeld verdict with the error dlock matches.
func TestAcquireKind(t *testing.T) {
	errDeadlock, errOther := errors.New("deadlock"), errors.New("other")
	r := driver.Request{Name: "n", Kind: driver.Permit, Limit: 2}
	run := func(results ...error) (int, driver.Grant, error) {
		tries := 0
		g, err := AcquireKind(context.Background(), "pkg", r, func() (driver.Grant, Verdict, int, error) {
			err := results[min(tries, len(results)-1)]
			tries++
			if err != nil {
				return driver.Grant{}, Refuse, 0, err
			}
			return driver.Grant{Acquired: true, Token: 7}, Grant, 2, nil
		}, func(err error) bool { return errors.Is(err, errDeadlock) },
			func(op string, err error) error { return fmt.Errorf("pkg: %s: %w", op, err) })
		return tries, g, err
	}
	if tries, g, err := run(errDeadlock, errDeadlock, nil); err != nil || !g.Acquired || g.Token != 7 || tries != 3 {
		t.Errorf("two deadlocks, then a grant: %d tries, %+v, %v; want the grant on the third", tries, g, err)
	}
	if tries, _, err := run(errDeadlock); !errors.Is(err, errDeadlock) || tries != 4 || !strings.HasPrefix(err.Error(), "pkg: acquire: ") {
		t.Errorf("deadlocks only: %d tries, %v; want 4 and the last deadlock, wrapped", tries, err)
	}
	if tries, _, err := run(errOther, nil); !errors.Is(err, errOther) || tries != 1 {
		t.Errorf("another error: %d tries, %v; want 1, not retried", tries, err)
	}
	for v, want := range map[Verdict]error{Mismatch: driver.ErrLimitMismatch, KindHeld: driver.ErrUnsupported} {
		_, err := AcquireKind(context.Background(), "pkg", r, func() (driver.Grant, Verdict, int, error) { return driver.Grant{}, v, 3, nil },
			func(error) bool { return false }, func(_ string, err error) error { return err })
		if !errors.Is(err, want) || !strings.HasPrefix(err.Error(), "pkg: ") {
			t.Errorf("verdict %d: %v; want %v, prefixed", v, err, want)
		}
	}
}
