package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"
)

const (
	startMark = "<!-- bench:start -->"
	endMark   = "<!-- bench:end -->"
)

// writeMarkdown puts the results table between the markers of path
// (appending them if missing).
func writeMarkdown(path string, rs []result, many []manyResult, dur time.Duration, runs int) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n## Side by side with the peers (`make bench`)\n\n", startMark)
	fmt.Fprintf(&b, "Written by `bench/` on %s: %d runs of %v per cell, the median shown with the range; "+
		"each contender has its own client or session. Uncontended and 16 names: in each run the libraries of a store "+
		"take turns of %v, so a drift of the machine's speed falls on all of them alike. "+
		"Contended: 16 contenders on one name, each holding it 1 ms. "+
		"Handoff: from one holder's unlock to the next holder's Lock returning. Re-acquired: share of acquisitions by "+
		"the contender that had just released.\n\n", time.Now().UTC().Format("2006-01-02"), runs, dur, dur/nSlices)
	for _, scenario := range []string{"uncontended", "16 names", "contended"} {
		fmt.Fprintf(&b, "### %s\n\n", scenario)
		if scenario == "contended" {
			b.WriteString("| store | library | acquisitions/s (range) | held % | handoff p50 / p99 ms | wait p50 / p99 ms | max/min | re-acquired % | errors |\n|---|---|---|---|---|---|---|---|---|\n")
		} else {
			b.WriteString("| store | library | lock+unlock/s (range) | errors |\n|---|---|---|---|\n")
		}
		for _, r := range rs {
			if r.Scenario != scenario {
				continue
			}
			rng := fmt.Sprintf("%.0f (%.0f–%.0f)", r.OpsPerSec, r.OpsRange[0], r.OpsRange[1])
			if r.Failed != "" {
				rng = "failed: " + r.Failed
			}
			if scenario == "contended" {
				fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.1f / %.1f | %.1f / %.1f | %.2f | %.0f | %d |\n", r.Store, r.Library, rng,
					r.HeldPct, r.HandoffP50, r.HandoffP99, r.WaitP50, r.WaitP99, r.MaxMin, r.Reacquire, r.Errors)
			} else {
				fmt.Fprintf(&b, "| %s | %s | %s | %d |\n", r.Store, r.Library, rng, r.Errors)
			}
		}
		b.WriteString("\n")
	}
	if len(many) > 0 {
		b.WriteString("### many leases\n\nOne dlock client holds the leases while its watchdog renews them every TTL/3, for two TTLs. " +
			"Heap is counted after GC against the client before the leases; goroutines are sampled every 20 ms while " +
			"holding, the fewest (what stays) and the most (renewal's passing workers); store calls are go-redis commands " +
			"or pipelines, etcd gRPC calls and streams, or ZooKeeper requests (pings included); CPU is the whole bench process's " +
			"(the client), as a share of one core. Medians of the runs with their range; lost is the worst run's.\n\n")
		b.WriteString("| store | leases | TTL | heap per lease | extra goroutines (fewest / most) | store calls per renewal interval | client CPU | lost |\n|---|---|---|---|---|---|---|---|\n")
		for _, m := range many {
			if m.Failed != "" {
				fmt.Fprintf(&b, "| %s | %d | %s | failed: %s | | | | |\n", m.Store, m.Leases, m.TTL, m.Failed)
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %.0f B (%.0f–%.0f) | %d / %d | %.1f (%.1f–%.1f) | %.1f%% (%.1f–%.1f) | %d |\n", m.Store, m.Leases, m.TTL,
				m.HeapPerLease, m.HeapRange[0], m.HeapRange[1], m.ExtraGoroutines, m.PeakGoroutines,
				m.CallsPerRenewal, m.CallsRange[0], m.CallsRange[1], m.CPUPct, m.CPURange[0], m.CPURange[1], m.Lost)
		}
		b.WriteString("\n")
	}
	b.WriteString("![throughput](bench-throughput.svg)\n\n![contended handoff](bench-handoff.svg)\n")
	b.WriteString(endMark + "\n")

	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, startMark), strings.Index(s, endMark)
	if i >= 0 && j > i {
		s = s[:i] + b.String() + s[j+len(endMark)+1:]
	} else {
		s += "\n" + b.String()
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
