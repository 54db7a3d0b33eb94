package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
)

const (
	startMark = "<!-- bench:start -->"
	endMark   = "<!-- bench:end -->"
)

// writeMarkdown puts the results table between the markers of path
// (appending them if missing).
func writeMarkdown(path string, rep report) error {
	rs, many := rep.Results, rep.ManyLeases
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n## Side by side with the peers (`make bench`)\n\n", startMark)
	cmd := "cd bench && go run ."
	for _, a := range rep.Command {
		if strings.ContainsAny(a, " %*?") {
			a = "'" + a + "'"
		}
		cmd += " " + a
	}
	fmt.Fprintf(&b, "Written by `bench/` on %s with\n\n```sh\n%s\n```\n\n", rep.Date, cmd)
	fmt.Fprintf(&b, "(load average %s before, %s after, on 2 cores). %d runs of %s per cell, the median shown with the range; "+
		"each contender has its own client or session. ", rep.LoadBefore, rep.LoadAfter, rep.Runs, rep.Duration)
	if rep.Method == "isolated" {
		b.WriteString("Each run of each library is a process of its own (the tool runs itself again with the servers' " +
			"addresses), with an untimed warm-up in the process first; the runs of a store's libraries interleave, A B C A B C, " +
			"so a drift of the machine's speed falls on all of them alike. Client memory and CPU per operation are that process's " +
			"(bytes allocated, user + system CPU), medians over the runs. ")
	} else if rep.Method == "turns" {
		fmt.Fprintf(&b, "Uncontended and 16 names: each library is a process of its own (the tool runs itself again with the "+
			"servers' addresses), all of a store's alive at once and taking turns of %s/%d at the parent's word in each run, after "+
			"an untimed warm-up (`-method turns`, the default); × plain is the ratio to the plain limit in each run, its median and range. "+
			"Client B/op and CPU are the library's process's during its turns (bytes allocated; user + system CPU), server CPU the "+
			"Redis or ZooKeeper process's during its turns (etcd runs embedded in the parent: not shown); medians. "+
			"Contended: each run of each library is a process of its own, the runs interleaved. ", rep.Duration, turnSlices)
	} else {
		fmt.Fprintf(&b, "Uncontended and 16 names: in each run the libraries of a store take turns of %s/20 in one process "+
			"(`-method sliced`; see above for what it gets wrong). ", rep.Duration)
	}
	b.WriteString("Contended: 16 contenders on one name, each holding it 1 ms. " +
		"Handoff: from one holder's unlock to the next holder's Lock returning. Re-acquired: share of acquisitions by " +
		"the contender that had just released.\n\n")
	for _, scenario := range []string{"uncontended", delayedScenario, "16 names", "contended"} {
		if scenario == delayedScenario && !slices.ContainsFunc(rs, func(r result) bool { return r.Scenario == scenario }) {
			continue // not run: the table as before it existed
		}
		fmt.Fprintf(&b, "### %s\n\n", scenario)
		if scenario == delayedScenario {
			fmt.Fprintf(&b, "The uncontended scenario as a service sees it across a network: each store behind a TCP proxy "+
				"(internal/testserver's, in the parent process) that passes every byte on %v after it read it, each way; at least "+
				"that, plus the scheduler's lateness, which a loaded machine makes larger. Every round trip then costs a library "+
				"2 × %v or more, on top of the CPU it costs on loopback. Costs per operation are the uncontended table's: a turn here "+
				"is a few hundred operations, too few for the runtime's count of bytes allocated (counted a span at a time) "+
				"and the servers' CPU clock (10 ms ticks) to divide by.", netDelay, netDelay)
			if len(rep.DelayedRTT) == 2 {
				fmt.Fprintf(&b, " A one-byte round trip through such a proxy to an echo server took %.2f ms before the runs and "+
					"%.2f ms after (medians of 200).", rep.DelayedRTT[0], rep.DelayedRTT[1])
			}
			b.WriteString("\n\n")
		}
		if scenario == "contended" {
			b.WriteString("| store | library | acquisitions/s (range) | held % | handoff p50 / p99 ms | wait p50 / p99 ms | max/min | re-acquired % | errors |\n|---|---|---|---|---|---|---|---|---|\n")
		} else {
			b.WriteString("| store | library | lock+unlock/s (range) | × plain, run by run: median (range) | client B/op | client CPU µs/op | server CPU µs/op | errors |\n|---|---|---|---|---|---|---|---|\n")
		}
		plain := map[string]float64{}
		for _, r := range rs {
			if r.Scenario == scenario && strings.HasPrefix(r.Library, "plain") {
				plain[r.Store] = r.OpsPerSec
			}
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
				continue
			}
			ratio, mem, cpu, scpu := "", "", "", ""
			if r.ServerCPUPerOp > 0 {
				scpu = fmt.Sprintf("%.0f", r.ServerCPUPerOp)
			}
			if len(r.RatioRange) == 2 && r.Failed == "" {
				ratio = fmt.Sprintf("%.2f× (%.2f–%.2f)", r.Ratio, r.RatioRange[0], r.RatioRange[1])
			} else if p := plain[r.Store]; p > 0 && r.Failed == "" {
				ratio = fmt.Sprintf("%.2f×", r.OpsPerSec/p)
			}
			if r.AllocPerOp > 0 {
				mem, cpu = fmt.Sprintf("%.0f", r.AllocPerOp), fmt.Sprintf("%.0f", r.CPUPerOp)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %d |\n", r.Store, r.Library, rng, ratio, mem, cpu, scpu, r.Errors)
		}
		b.WriteString("\n")
	}
	if len(rep.Kinds) > 0 {
		fmt.Fprintf(&b, "### read-write lock and semaphore against the mutex (issue #17)\n\n"+
			"dlock only: 16 workers, each with its own client, on one name, each holding what it got for %s, then releasing. ", rep.Kinds[0].Hold)
		b.WriteString(
			"rw: each hold is a read hold of one RWMutex with probability 0.9, else a write hold; semaphore: one of 4 permits of " +
				"one Semaphore; the mutex: every hold a Lock of one Mutex (the same runs are the baseline of both). Each run a process " +
				"of its own, interleaved mutex, rw, semaphore. Most inside: the most holders seen at once. Store calls are per hold " +
				"(acquire and release); CPU is the worker process's and the server's (the Redis or ZooKeeper process; etcd, embedded in " +
				"the parent, the parent's) during the run, in % of one core of the two; medians. " +
				"`go run . -bounds` prints the best these scenarios can give under their rules.\n\n")
		b.WriteString("| store | scenario | mutex holds/s (range) | kind holds/s (range) | ratio | target | most inside | store calls per hold (mutex / kind) | client + server CPU, % of one core (mutex / kind) | errors |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, k := range rep.Kinds {
			if k.Failed != "" {
				fmt.Fprintf(&b, "| %s | %s | failed: %s | | | %.1f× | | | | |\n", k.Store, k.Scenario, k.Failed, k.Target)
				continue
			}
			mark := "✘"
			if k.Ratio >= k.Target {
				mark = "✔"
			}
			cores := func(client, server, ops float64) string {
				return fmt.Sprintf("%.0f + %.0f", client*ops/1e4, server*ops/1e4)
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) | **%.2f×** | ≥ %.1f× %s | %d | %.1f / %.1f | %s / %s | %d |\n",
				k.Store, k.Scenario, k.MutexOps, k.MutexRng[0], k.MutexRng[1], k.KindOps, k.KindRng[0], k.KindRng[1],
				k.Ratio, k.Target, mark, k.MaxInside, k.MutexCalls, k.KindCalls,
				cores(k.MutexCPU, k.MutexServerCPU, k.MutexOps), cores(k.KindCPU, k.KindServerCPU, k.KindOps), k.Errors)
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
	if len(rep.Kinds) > 0 {
		b.WriteString("\n![read-write lock and semaphore against the mutex](bench-kinds.svg)\n")
	}
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
