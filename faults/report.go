package faults

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// WriteTable writes results as a Markdown table: backend × fault →
// promise, observed figures, verdict.
func WriteTable(w io.Writer, results []Result) {
	fmt.Fprintln(w, "| backend | fault | promise | inj. | holds | overlaps | excused (unfenced) | stale writes rejected | min loss margin ms (late/losses) | recovery ms (+ store stalled) | progress ms (+ store stalled) | token regressions | dead grants | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		excused := fmt.Sprintf("%d (%d)", r.Excused, r.Unfenced)
		if r.Stalled > 0 {
			excused += fmt.Sprintf(", %d stalled", r.Stalled)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %s | %d | %s (%d/%d) | %s | %s | %d | %d | %s |\n",
			r.Backend, r.Fault, r.Promise, r.Injections, r.Holds, r.Overlaps, excused, r.Stale,
			num(r.MinMarginMs), r.LateLosses, r.Losses, withStore(r.RecoveryMs, r.StoreRecoveryMs), withStore(r.ProgressMs, r.StoreProgressMs), r.Regressions, r.DeadGrants, Verdict(r))
	}
}

// Verdict is "pass", or "FAIL: " and what failed, or "not run: " and why.
func Verdict(r Result) string {
	switch {
	case r.Error != "":
		return "not run: " + oneLine(r.Error)
	case len(r.Fails) > 0:
		return "**FAIL**: " + strings.Join(r.Fails, "; ")
	case len(r.StoreExcused) > 0:
		return "pass (" + strings.Join(r.StoreExcused, "; ") + ")"
	}
	return "pass"
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "none"
	}
	return fmt.Sprintf("%.0f", v)
}

// withStore is a wait that the store answered in, and the time it stalled
// in the wait, left out of it.
func withStore(v, stalled float64) string {
	if stalled == 0 {
		return num(v)
	}
	return fmt.Sprintf("%s (+%.0f)", num(v), stalled)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	return tail(s, 300)
}
