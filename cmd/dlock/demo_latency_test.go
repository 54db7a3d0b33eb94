package main

import (
	"bytes"
	"html"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestHistogram(t *testing.T) {
	ms := time.Millisecond
	h := histogram([]time.Duration{ms / 2, ms, ms + 1, 3 * ms, 40 * ms, 1500 * ms, 2 * time.Second, 5 * time.Second})
	want := []int{2, 1, 1, 0, 0, 1, 0, 0, 0, 0, 2, 1}
	if len(h) != len(latencyLabels) {
		t.Fatalf("%d buckets for %d labels", len(h), len(latencyLabels))
	}
	for i := range want {
		if h[i] != want[i] {
			t.Fatalf("histogram = %v; want %v", h, want)
		}
	}
	var b bytes.Buffer
	printHistograms(&b, []demoRow{{Mode: "lock", Histogram: h}, {Mode: "cas", Histogram: make([]int, len(h))}})
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "latency (ms)") {
		t.Fatalf("histograms:\n%s", b.String())
	}
	// The fullest buckets get the full bar, a bucket of one the lowest,
	// an empty bucket nothing; bars sit under their bucket's label.
	col := func(line string, i int) string {
		r := []rune(line + strings.Repeat(" ", cellW*len(latencyLabels)))
		start := 13 + i*cellW
		return strings.TrimSpace(string(r[start : start+cellW]))
	}
	if got := col(lines[1], 0); got != "███" {
		t.Errorf("bucket ≤1 (2 requests, the most) = %q", got)
	}
	if got := col(lines[1], 2); got != "▄▄▄" {
		t.Errorf("bucket ≤5 (1 of 2) = %q", got)
	}
	if got := col(lines[1], 3); got != "" {
		t.Errorf("empty bucket ≤10 = %q", got)
	}
	if got := col(lines[0], 11); got != ">2s" {
		t.Errorf("last label = %q", got)
	}
	if strings.TrimSpace(strings.TrimPrefix(lines[2], "         cas")) != "" {
		t.Errorf("a mode with no requests draws bars: %q", lines[2])
	}
}

// A long backend URL stays inside its panel: no text line of the SVG is
// wider than a panel, the whole URL is kept in a tooltip, and a legend
// says what the red bars are.
func TestLatencySVGFitsPanels(t *testing.T) {
	long := "postgres://app@db-primary.payments.internal.example.com:5432/inventory?mode=row&max_held=64"
	rows := []demoRow{
		{Backend: long, Mode: "lock", P50ms: 1.5, P99ms: 2300, Histogram: []int{1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 4, 1}},
		{Backend: long, Mode: "fenced", P50ms: 1.2, P99ms: 20, Histogram: []int{5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
	}
	path := t.TempDir() + "/l.svg"
	if err := writeLatencySVG(path, rows); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	panelW := len(latencyLabels)*(26+4) + 20
	for _, line := range strings.Split(svg, "\n") {
		if !strings.HasPrefix(line, "<text") || strings.Contains(line, `font-size="13"`) || strings.Contains(line, "text-anchor") {
			continue // the page title spans both columns; bar labels are short
		}
		text := line[strings.Index(line, ">")+1 : strings.LastIndex(line, "</text>")]
		if i := strings.Index(text, "</title>"); i >= 0 {
			text = text[i+len("</title>"):]
		}
		if w := utf8.RuneCountInString(html.UnescapeString(text)) * 7; w > panelW {
			t.Errorf("a line of about %dpx in a %dpx panel: %q", w, panelW, text)
		}
	}
	if !strings.Contains(svg, "<title>"+html.EscapeString(long)+"</title>") {
		t.Error("the whole backend URL is not kept in a tooltip")
	}
	if !strings.Contains(svg, "a second or more") {
		t.Error("no legend for the red bars")
	}
}
