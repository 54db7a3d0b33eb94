package main

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// The charts are small multiples: one panel per store and scenario, each
// with its own scale (values from 300 to 60,000/s share no axis well), bars
// labelled with their value and their ratio to the store's plain limit, and
// one colour per library across every panel, dlock's standing out. They are
// written as SVG by hand so that nothing is clipped or overlaps at the size
// docs/benchmarks.md shows them (about 900 px wide).

const (
	panelW   = 310 // one panel's width
	labelW   = 150 // library names, left of the bars
	valueW   = 78  // value labels, right of the bars
	barH     = 14
	barGap   = 6
	titleH   = 22
	panelPad = 10
	fontPx   = 11
)

// libColors gives each library one colour in every panel.
var libColors = map[string]string{
	"dlock":             "#d62728",
	"redsync":           "#1f77b4",
	"bsm/redislock":     "#2ca02c",
	"concurrency.Mutex": "#9467bd",
	"zk.Lock":           "#8c564b",
	// The kinds charts: dlock's own, the mutex as the lighter baseline.
	"Mutex":     "#f0a0a0",
	"RWMutex":   "#d62728",
	"Semaphore": "#d62728",
}

var spareColors = []string{"#17becf", "#bcbd22", "#e377c2", "#ff7f0e"}

func colorOf(lib string, spare map[string]string) string {
	if strings.HasPrefix(lib, "plain") {
		return "#9e9e9e"
	}
	if c, ok := libColors[lib]; ok {
		return c
	}
	if c, ok := spare[lib]; ok {
		return c
	}
	c := spareColors[len(spare)%len(spareColors)]
	spare[lib] = c
	return c
}

// svgDoc collects an SVG's elements.
type svgDoc struct{ b strings.Builder }

func (d *svgDoc) text(x, y float64, anchor, weight, fill, s string) {
	fmt.Fprintf(&d.b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-weight="%s" fill="%s">%s</text>`+"\n",
		x, y, anchor, weight, fill, html.EscapeString(s))
}

func (d *svgDoc) rect(x, y, w, h float64, fill string, opacity float64) {
	fmt.Fprintf(&d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="%.2f"/>`+"\n",
		x, y, w, h, fill, opacity)
}

func (d *svgDoc) save(path string, w, h float64, title string) error {
	var out strings.Builder
	fmt.Fprintf(&out, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" `+
		`font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="%d">`+"\n", w, h, w, h, fontPx)
	fmt.Fprintf(&out, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&out, `<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	out.WriteString(d.b.String())
	out.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(out.String()), 0o644)
}

// bar is one bar of a panel.
type bar struct {
	lib   string
	value float64 // drawn length
	label string  // right of the bar
	light float64 // a second, lighter bar's length (0: none)
}

// mark is a value drawn as a dashed line across a panel's bars, labelled
// below them (a target, a ceiling).
type mark struct {
	value float64
	label string
	dash  string // the stroke-dasharray
}

// panel draws one small multiple at (x, y) and returns its height.
// A mark > 0 draws a dashed line at that value across the bars, labelled
// markLabel below them (a target).
func (d *svgDoc) panel(x, y float64, title string, bars []bar, spare map[string]string, value float64, markLabel string) float64 {
	var marks []mark
	if value > 0 {
		marks = []mark{{value, markLabel, "4 3"}}
	}
	return d.panelW(x, y, title, bars, spare, marks, labelW, valueW)
}

// panelW is panel with any number of marks and the widths of the names
// and the values given.
func (d *svgDoc) panelW(x, y float64, title string, bars []bar, spare map[string]string, marks []mark, labelW, valueW float64) float64 {
	d.text(x, y+14, "start", "bold", "#333333", title)
	top := y + titleH
	maxV := 0.0
	for _, m := range marks {
		maxV = math.Max(maxV, m.value)
	}
	for _, b := range bars {
		maxV = math.Max(maxV, math.Max(b.value, b.light))
	}
	scale := 0.0
	barsW := panelW - labelW - valueW
	if maxV > 0 {
		scale = barsW / maxV
	}
	d.rect(x+labelW, top-2, 0.8, float64(len(bars))*(barH+barGap), "#555555", 1) // the zero line
	for i, b := range bars {
		by := top + float64(i)*(barH+barGap)
		weight, fill := "normal", "#333333"
		if b.lib == "dlock" {
			weight = "bold"
		}
		d.text(x+labelW-6, by+barH-3, "end", weight, fill, b.lib)
		c := colorOf(b.lib, spare)
		if b.light > 0 {
			d.rect(x+labelW, by, b.light*scale, barH, c, 0.35)
		}
		d.rect(x+labelW, by+2, b.value*scale, barH-4, c, 1)
		lx := x + labelW + math.Max(b.value, b.light)*scale + 4
		for _, m := range marks {
			if mx := x + labelW + m.value*scale; lx < mx+4 && lx+textW(b.label) > mx-2 {
				lx = mx + 4 // past the mark's line, not across it
			}
		}
		d.text(lx, by+barH-3, "start", weight, fill, b.label)
	}
	h := titleH + float64(len(bars))*(barH+barGap)
	lines := y + h
	for _, m := range marks { // each label on a line of its own, below the bars
		mx := x + labelW + m.value*scale
		fmt.Fprintf(&d.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#222222" stroke-width="1.2" stroke-dasharray="%s"/>`+"\n",
			mx, top-4, mx, lines, m.dash)
		anchor := "end"
		if mx-x-labelW < 80 {
			anchor = "start"
		}
		d.text(mx, y+h+fontPx+1, anchor, "normal", "#222222", m.label)
		h += fontPx + 4
	}
	return h
}

// charts draws docs/bench-throughput.svg (one panel per store and
// scenario: operations per second, and the ratio to the store's plain
// limit) and docs/bench-handoff.svg (one panel per store: contended handoff
// p50 and p99). The delayed scenario is in the table only: a fourth column
// of panels would not fit the width the charts are shown at.
func charts(docs string, rs []result, ks []kindResult) error {
	var stores, scenarios []string
	for _, r := range rs {
		if r.Scenario == delayedScenario {
			continue
		}
		if !contains(stores, r.Store) {
			stores = append(stores, r.Store)
		}
		if !contains(scenarios, r.Scenario) {
			scenarios = append(scenarios, r.Scenario)
		}
	}
	spare := map[string]string{}
	var d svgDoc
	y := 36.0
	for _, st := range stores {
		rowH := 0.0
		for ci, sc := range scenarios {
			var bars []bar
			plain := 0.0
			for _, r := range rs {
				if r.Store == st && r.Scenario == sc && strings.HasPrefix(r.Library, "plain") {
					plain = r.OpsPerSec
				}
			}
			for _, r := range rs {
				if r.Store != st || r.Scenario != sc {
					continue
				}
				label := humanRate(r.OpsPerSec)
				if r.Failed != "" {
					label = "failed"
				} else if r.Ratio > 0 && !strings.HasPrefix(r.Library, "plain") {
					label += fmt.Sprintf(" · %.2f×", r.Ratio) // the median of the runs' ratios
				} else if plain > 0 && !strings.HasPrefix(r.Library, "plain") {
					label += fmt.Sprintf(" · %.2f×", r.OpsPerSec/plain)
				}
				bars = append(bars, bar{lib: r.Library, value: r.OpsPerSec, label: label})
			}
			if len(bars) == 0 {
				continue
			}
			h := d.panel(10+float64(ci)*(panelW+panelPad), y, st+" · "+sc+" (/s)", bars, spare, 0, "")
			rowH = math.Max(rowH, h)
		}
		y += rowH + 14
	}
	w := 10 + float64(len(scenarios))*(panelW+panelPad)
	title := "lock+unlock/s (contended: acquisitions/s), median run; × = median of the runs' ratios to the plain limit"
	if err := d.save(filepath.Join(docs, "bench-throughput.svg"), w, y, title); err != nil {
		return err
	}

	var h svgDoc
	y, col, rowH := 36.0, 0, 0.0
	for _, st := range stores {
		var bars []bar
		for _, r := range rs {
			if r.Store == st && r.Scenario == "contended" && r.HandoffP99 > 0 {
				bars = append(bars, bar{lib: r.Library, value: r.HandoffP50, light: r.HandoffP99,
					label: fmt.Sprintf("%.1f / %.1f ms", r.HandoffP50, r.HandoffP99)})
			}
		}
		if len(bars) == 0 {
			continue
		}
		ph := h.panel(10+float64(col)*(panelW+panelPad), y, st+" · handoff p50 / p99", bars, spare, 0, "")
		rowH = math.Max(rowH, ph)
		if col++; col == 3 {
			y, col, rowH = y+rowH+14, 0, 0
		}
	}
	if rowH > 0 {
		y += rowH + 14
	}
	if err := h.save(filepath.Join(docs, "bench-handoff.svg"), 10+3*(panelW+panelPad), y,
		"contended handoff, unlock to the next Lock returning: p50 (dark) and p99 (light), ms"); err != nil {
		return err
	}
	if len(ks) == 0 {
		return nil
	}
	return kindsChart(filepath.Join(docs, "bench-kinds.svg"), ks, spare)
}

// kindsChart draws one panel per store and kinds scenario: the mutex's
// holds per second against the read-write lock's or the semaphore's, with
// the target as a dashed line.
func kindsChart(path string, ks []kindResult, spare map[string]string) error {
	var d svgDoc
	var stores []string
	for _, k := range ks {
		if !contains(stores, k.Store) {
			stores = append(stores, k.Store)
		}
	}
	y := 36.0
	for _, sc := range []string{scRW, scSem} { // a row per scenario, a column per store
		rowH := 0.0
		for ci, st := range stores {
			for _, k := range ks {
				if k.Store != st || k.Scenario != sc {
					continue
				}
				kind := "RWMutex"
				if sc == scSem {
					kind = "Semaphore"
				}
				var bars []bar
				if k.Failed != "" {
					bars = []bar{{lib: kind, label: "failed"}}
				} else {
					bars = []bar{
						{lib: "Mutex", value: k.MutexOps, label: humanRate(k.MutexOps)},
						{lib: kind, value: k.KindOps, label: fmt.Sprintf("%s · %.2f×", humanRate(k.KindOps), k.Ratio)},
					}
				}
				marks := []mark{{k.Target * k.MutexOps, fmt.Sprintf("target %.1f×", k.Target), "4 3"}}
				if c := kindsCeiling(sc); c > 0 {
					marks = append(marks, mark{c * k.MutexOps, fmt.Sprintf("ceiling %.2f×: no fair lock passes it", c), "1 2"})
				}
				h := d.panelW(10+float64(ci)*(panelW+panelPad), y, st+" · "+sc, bars, spare, marks, 72, 96)
				rowH = math.Max(rowH, h)
			}
		}
		y += rowH + 14
	}
	return d.save(path, 10+float64(max(len(stores), 2))*(panelW+panelPad), y,
		"one name, 16 workers, each hold 1 ms: holds/s; × = ratio to the mutex; dashed: target; dotted: ceiling")
}

// redrawCharts draws the charts from docs/benchmarks.json, measuring nothing.
func redrawCharts(docs string) error {
	b, err := os.ReadFile(filepath.Join(docs, "benchmarks.json"))
	if err != nil {
		return err
	}
	var saved report
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(docs, "benchmarks.json"), err)
	}
	return charts(docs, saved.Results, saved.Kinds)
}

// textW estimates the width of s at the charts' font size.
func textW(s string) float64 { return float64(len([]rune(s))) * fontPx * 0.62 }

// humanRate writes n per second briefly: 669, 1,088, 10.3k, 61.5k.
func humanRate(n float64) string {
	switch {
	case n >= 10000:
		return fmt.Sprintf("%.1fk", n/1000)
	case n >= 1000:
		return fmt.Sprintf("%d,%03d", int(n)/1000, int(n)%1000)
	}
	return fmt.Sprintf("%.0f", n)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
