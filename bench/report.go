package main

import (
	"bytes"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
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

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// charts draws throughput per scenario (bars per library, grouped by
// store and scenario) and the contended handoff latencies.
func charts(docs string, rs []result) error {
	var groups []string
	libs := map[string]int{}
	var libOrder []string
	for _, r := range rs {
		g := r.Store + " " + r.Scenario
		if !contains(groups, g) {
			groups = append(groups, g)
		}
		if _, ok := libs[r.Library]; !ok {
			libs[r.Library] = len(libOrder)
			libOrder = append(libOrder, r.Library)
		}
	}
	p := plot.New()
	p.Title.Text = "lock+unlock (or acquisitions) per second, median of runs"
	p.Y.Label.Text = "per second"
	w := vg.Points(8)
	for li, lib := range libOrder {
		vals := make(plotter.Values, len(groups))
		for _, r := range rs {
			if r.Library == lib {
				vals[indexOf(groups, r.Store+" "+r.Scenario)] = r.OpsPerSec
			}
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.Color = palette[li%len(palette)]
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(li-len(libOrder)/2)
		p.Add(bars)
		p.Legend.Add(lib, bars)
	}
	p.Legend.Top = true
	p.NominalX(groups...)
	if err := p.Save(vg.Length(90*len(groups))+200, 360, filepath.Join(docs, "bench-throughput.svg")); err != nil {
		return err
	}

	h := plot.New()
	h.Title.Text = "contended handoff latency, ms (p50 and p99)"
	var names []string
	var p50, p99 plotter.Values
	for _, r := range rs {
		if r.Scenario == "contended" {
			names = append(names, r.Store+"\n"+r.Library)
			p50, p99 = append(p50, r.HandoffP50), append(p99, r.HandoffP99)
		}
	}
	if len(names) == 0 {
		return nil
	}
	for i, v := range []plotter.Values{p50, p99} {
		bars, err := plotter.NewBarChart(v, w)
		if err != nil {
			return err
		}
		bars.Color = palette[i]
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(2*i-1) / 2
		h.Add(bars)
		h.Legend.Add([]string{"p50", "p99"}[i], bars)
	}
	h.Legend.Top = true
	h.NominalX(names...)
	return h.Save(vg.Length(70*len(names))+150, 360, filepath.Join(docs, "bench-handoff.svg"))
}

func contains(s []string, v string) bool { return indexOf(s, v) >= 0 }

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
