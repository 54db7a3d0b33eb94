package faults_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/faults"
)

// TestCISubset runs the bounded subset of the fault suite that CI runs:
// every backend × {pause a waiter, blackhole a holder}, one injection each,
// with a 2 s TTL, contending through a Mutex, and where the backend holds
// them through an RWMutex and a Semaphore; and candidates of an election on
// Redis, etcd and ZooKeeper. A failed verdict fails the test (make faults runs the
// whole suite).
func TestCISubset(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault suite runs worker processes and real servers")
	}
	cfg := faults.Config{WorkerBin: buildWorker(t), TTL: 2 * time.Second, Workers: 3, Hold: 20 * time.Millisecond, Rounds: 1,
		Progress: t.Logf}
	bs := faults.Backends()
	var natives []*faults.Backend // the elections with a layout of their own, and Redis's portable one
	for _, b := range bs {
		if b.Name == "redis" || b.Name == "etcd" || b.Name == "zk" {
			natives = append(natives, b)
		}
	}
	all := append(append(bs, faults.KindBackends(bs)...), faults.ElectionBackends(natives)...)
	plan := faults.Plan(all, []*faults.Fault{faults.PauseWaiter, faults.BlackholeHolder})
	for _, group := range plan {
		t.Run(group[0].Store, func(t *testing.T) {
			for _, r := range faults.RunGroup(t.Context(), t, cfg, group, nil) {
				if r.Probed && r.Error == "" && r.Probes == 0 {
					t.Errorf("%s × %s: the store never answered the stall probe", r.Backend, r.Fault)
				}
				if !r.OK() {
					t.Errorf("%s × %s: %s (%d stalls, %.0f ms; the store %d, %.0f ms)\n%s", r.Backend, r.Fault, faults.Verdict(r), r.Stalls, r.StallMs, r.StoreStalls, r.StoreStallMs, r.Output)
				} else {
					t.Logf("%s × %s: %s (%d holds, min loss margin %.0f ms, %d told late in a stall of their process; next grant %.0f ms after a death (+%.0f the store stalled), %.0f ms after the fault (+%.0f); %d stalls, %.0f ms; the store %d, %.0f ms)",
						r.Backend, r.Fault, faults.Verdict(r), r.Holds, r.MinMarginMs, r.Stalled, r.RecoveryMs, r.StoreRecoveryMs, r.ProgressMs, r.StoreProgressMs, r.Stalls, r.StallMs, r.StoreStalls, r.StoreStallMs)
				}
			}
		})
	}
}

// buildWorker builds the suite's command, which the suite re-executes as
// each worker, once.
func buildWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dlockfaults")
	// go test puts its own GOROOT/bin first on the PATH, so this is the
	// toolchain running the test.
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/dlockfaults")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/dlockfaults: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return bin
}
