package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/dlock/dlock/internal/testserver"
	"golang.org/x/sys/unix"
)

// startProbe runs probeStore on a Redis server of its own until the test
// ends, and waits for its first answers.
func startProbe(t *testing.T) (*testserver.Server, *run) {
	t.Helper()
	srv := testserver.Redis(t)
	chk, err := NewChecker()
	if err != nil {
		t.Fatal(err)
	}
	r := &run{store: &Store{Kind: "redis", Servers: []*testserver.Server{srv}}, chk: chk, b: &Backend{Name: "redis"}, f: PauseWaiter}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.probeStore(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = chk.Close() })
	waitProbes(t, r, 3)
	return srv, r
}

func waitProbes(t *testing.T, r *run, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.probes.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the store answered %d probes, want %d", r.probes.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// storeStalls are the stalls recorded that end after from.
func storeStalls(r *run, from time.Time) (ws []window, total time.Duration) {
	for _, e := range r.chk.Events() {
		if e.Kind == kindStoreStall && e.Until > from.UnixNano() {
			ws = append(ws, window{-1, e.T, e.Until})
			total += time.Duration(e.Until - e.T)
		}
	}
	return ws, total
}

// A server kept from a CPU (here: SCHED_IDLE among busy loops, as a loaded
// machine's scheduler does to it) is recorded as stalled, inside the time
// it was starved.
func TestProbeRecordsStarvedStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis server")
	}
	srv, r := startProbe(t)
	if err := unix.SchedSetAttr(srv.Pid(), &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
		t.Skipf("cannot make the server SCHED_IDLE: %v", err)
	}
	from := time.Now()
	stop := hogs(t, runtime.NumCPU()+1)
	time.Sleep(1500 * time.Millisecond)
	stop()
	to := time.Now()
	// Back to the ordinary policy if this process may (RLIMIT_NICE).
	_ = unix.SchedSetAttr(srv.Pid(), &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
	waitProbes(t, r, r.probes.Load()+3)
	ws, total := storeStalls(r, from)
	if total < 100*time.Millisecond {
		t.Fatalf("%v of store stalls recorded while the server was starved for 1.5 s, want 100 ms or more: %+v", total, ws)
	}
	t.Logf("%v of store stalls in %d windows", total, len(ws))
	for _, w := range ws {
		if w.from < from.UnixNano() || w.to > to.Add(time.Second).UnixNano() {
			t.Fatalf("stall %v to %v, outside the starvation %v to %v", time.Unix(0, w.from), time.Unix(0, w.to), from, to)
		}
	}
}

// A server that does not answer but is not kept from a CPU (stopped here;
// a server busy with its own work is the same to the kernel's count) is
// excused nothing: its slowness may be the lock's doing.
func TestProbeDoesNotExcuseAStoppedStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis server")
	}
	srv, r := startProbe(t)
	from := time.Now()
	srv.Pause()
	time.Sleep(600 * time.Millisecond)
	srv.Resume()
	n := r.probes.Load()
	waitProbes(t, r, n+3)
	if ws, total := storeStalls(r, from); total > 200*time.Millisecond {
		t.Fatalf("%v of store stalls recorded across a 600 ms stop, want under 200 ms: %+v", total, ws)
	}
}

// The controller's own stalls are taken out of a late answer, where they
// were: the wait is cut around them.
func TestOwnStallsOutside(t *testing.T) {
	ms := func(v int64) time.Time { return time.Unix(0, v*int64(time.Millisecond)) }
	var o ownStalls
	for _, w := range [][2]int64{{0, 100}, {150, 250}, {400, 500}} {
		o.ws = append(o.ws, window{-1, ms(w[0]).UnixNano(), ms(w[1]).UnixNano()})
	}
	o.seen = ms(1000).UnixNano()
	span := func(ws []window) (out [][2]int64) {
		for _, w := range ws {
			out = append(out, [2]int64{w.from / int64(time.Millisecond), w.to / int64(time.Millisecond)})
		}
		return out
	}
	if got := span(o.outside(ms(50), ms(300))); !slices.Equal(got, [][2]int64{{100, 150}, {250, 300}}) {
		t.Fatalf("outside 50–300 ms: %v, want [100 150] [250 300]", got)
	}
	if got := span(o.outside(ms(300), ms(450))); !slices.Equal(got, [][2]int64{{300, 400}}) {
		t.Fatalf("outside 300–450 ms: %v, want [300 400]", got)
	}
	if len(o.ws) != 1 {
		t.Fatalf("%d stalls kept after a probe past them, want 1", len(o.ws))
	}
}

// A wait is excused only up to the time the server waited for a CPU, as its
// latest part, and not at all under storeStallMin.
func TestLatest(t *testing.T) {
	ms := int64(time.Millisecond)
	ws := []window{{-1, 100 * ms, 150 * ms}, {-1, 250 * ms, 300 * ms}}
	if got := latest(ws, 70*time.Millisecond); len(got) != 2 || got[0].from != 130*ms || got[0].to != 150*ms || got[1].from != 250*ms {
		t.Fatalf("70 ms of the wait: %+v, want 130–150 and 250–300", got)
	}
	if got := latest(ws, time.Second); len(got) != 2 || got[0].from != 100*ms {
		t.Fatalf("more than the wait: %+v, want the whole wait", got)
	}
	if got := latest(ws, 15*time.Millisecond); got != nil {
		t.Fatalf("15 ms: %+v, want nothing", got)
	}
}

// The run-queue reader sees this process's thread wait for a CPU when busy
// processes compete for every one.
func TestRunQueueSeesStarvation(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	var q runQueue
	q.list(os.Getpid())
	before := q.read()
	if len(before) == 0 {
		t.Fatal("no thread of this process read")
	}
	n := runtime.NumCPU() + 1
	stop := hogs(t, n)
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); { // busy too
	}
	stop()
	// n+1 busy on NumCPU cores for 300 ms: a busy thread waits about
	// 300 ms × (1 − NumCPU/(n+1)), 100 ms on 2 cores.
	if d := q.read().most(before); d < 20*time.Millisecond {
		t.Fatalf("the busiest thread waited %v for a CPU beside %d busy processes, want 20 ms or more", d, n)
	}
}

// hogs starts n busy processes, which end when stop is called, when the
// test ends, or when this process is gone (even killed, when no cleanup
// runs), as scripts/busy.sh's loops do.
func hogs(t *testing.T, n int) (stop func()) {
	t.Helper()
	var cs []*exec.Cmd
	stop = func() {
		for _, c := range cs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		cs = nil
	}
	t.Cleanup(stop)
	loop := fmt.Sprintf("while kill -0 %d 2>/dev/null; do :; done", os.Getpid())
	for range n {
		c := exec.Command("sh", "-c", loop)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return stop
}
