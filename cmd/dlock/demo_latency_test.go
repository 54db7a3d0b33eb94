package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
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
