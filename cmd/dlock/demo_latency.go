package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// Each mode's latency distribution, in buckets on a log scale, so that a
// mode whose requests mostly take 20 ms and whose tail takes 2 s (a polling
// backend's waiters) shows both at a glance.

// latencyBounds are the buckets' upper bounds; the last bucket has none.
var latencyBounds = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2 * time.Second,
}

// latencyLabels name the buckets: "≤1" is up to 1 ms, ">2s" above 2 s.
var latencyLabels = []string{"≤1", "≤2", "≤5", "≤10", "≤20", "≤50", "≤100", "≤200", "≤500", "≤1s", "≤2s", ">2s"}

// histogram counts latencies per bucket of latencyBounds.
func histogram(ds []time.Duration) []int {
	h := make([]int, len(latencyBounds)+1)
	for _, d := range ds {
		i := 0
		for i < len(latencyBounds) && d > latencyBounds[i] {
			i++
		}
		h[i]++
	}
	return h
}

// sparks are the bar heights of a terminal histogram, lowest first.
var sparks = []rune("▁▂▃▄▅▆▇█")

// cellW is the width of one bucket in the terminal histogram.
const cellW = 5

// printHistograms prints one line per mode of backend: its latency
// histogram, each bucket's bar scaled to the mode's fullest bucket (an
// empty bucket is blank, a bucket with any request at least the lowest
// bar), under a header naming the buckets in ms.
func printHistograms(out io.Writer, rows []demoRow) {
	if len(rows) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "latency (ms) %s\n", cells(latencyLabels))
	for _, r := range rows {
		peak := 0
		for _, n := range r.Histogram {
			peak = max(peak, n)
		}
		bars := make([]string, len(r.Histogram))
		for i, n := range r.Histogram {
			if n == 0 {
				bars[i] = ""
				continue
			}
			level := int(math.Ceil(float64(n)/float64(peak)*float64(len(sparks)))) - 1
			bars[i] = strings.Repeat(string(sparks[max(level, 0)]), 3)
		}
		fmt.Fprintf(&b, "%12s %s\n", r.Mode, cells(bars))
	}
	fmt.Fprint(out, b.String())
}

// cells lays texts out in columns of cellW, centred.
func cells(texts []string) string {
	var b strings.Builder
	for _, t := range texts {
		n := len([]rune(t))
		left := (cellW - n) / 2
		b.WriteString(strings.Repeat(" ", max(left, 0)) + t + strings.Repeat(" ", max(cellW-n-left, 0)))
	}
	return strings.TrimRight(b.String(), " ")
}

// writeLatencySVG writes the histograms of rows as an SVG: one small panel
// per backend and mode, each bucket's bar scaled to the panel's fullest,
// the count above it and p50/p99 beside the mode's name.
func writeLatencySVG(path string, rows []demoRow) error {
	const (
		barW, gap     = 26, 4
		panelH, plotH = 124, 56
		left, top     = 10, 54
		plotTop       = 42 // below the two title lines and the tallest bar's count
	)
	panelW := len(latencyLabels)*(barW+gap) + 20
	width := left*2 + 2*panelW
	height := top + ((len(rows)+1)/2)*panelH + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="10">`+"\n",
		width, height, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="#ffffff"/>` + "\n")
	b.WriteString(`<text x="10" y="20" font-size="13" font-weight="bold">dlock demo: request latency per mode (ms, log buckets; bars scaled per panel)</text>` + "\n")
	fmt.Fprintf(&b, `<rect x="10" y="30" width="10" height="10" fill="%s"/><text x="24" y="39" fill="#333333">requests that took a second or more: the tail a buyer notices</text>`+"\n", tailColor)
	for k, r := range rows {
		x0 := left + (k%2)*panelW
		y0 := top + (k/2)*panelH
		// The mode and its figures, then the backend on a line of its own,
		// cut to the panel's width (a URL can be long), whole in a tooltip.
		title := fmt.Sprintf("%s · p50 %.1f ms · p99 %.1f ms", r.Mode, r.P50ms, r.P99ms)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, y0+10, html.EscapeString(title))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555555"><title>%s</title>%s</text>`+"\n", x0, y0+23,
			html.EscapeString(r.Backend), html.EscapeString(fitText(r.Backend, svgMaxChars(panelW-gap*3))))
		peak := 0
		for _, n := range r.Histogram {
			peak = max(peak, n)
		}
		base := y0 + plotTop + plotH
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="1" fill="#555555"/>`+"\n", x0, base, len(latencyLabels)*(barW+gap))
		for i, n := range r.Histogram {
			x := x0 + i*(barW+gap)
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#333333">%s</text>`+"\n",
				x+barW/2, base+14, html.EscapeString(latencyLabels[i]))
			if n == 0 || peak == 0 {
				continue
			}
			h := max(1, n*plotH/peak)
			color := "#1f77b4"
			if latencyBounds[min(i, len(latencyBounds)-1)] >= time.Second {
				color = tailColor // the tail a user would notice
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", x, base-h, barW, h, color)
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#333333">%d</text>`+"\n", x+barW/2, base-h-3, n)
		}
	}
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// tailColor marks the buckets of a second or more, explained in the legend.
const tailColor = "#d62728"

// svgMaxChars is how many characters of the panels' 10px text fit in
// width pixels, counting the widest common glyphs (digits, capitals and
// URL punctuation average under 7px in DejaVu Sans at 10px).
func svgMaxChars(width int) int { return width / 7 }

// fitText cuts s to at most n characters, ending it with "…" when cut.
func fitText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-1, 0)]) + "…"
}
