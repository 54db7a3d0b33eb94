package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// stderrIsTerminal reports whether stderr is a terminal: progress is
// shown only there, where it is redrawn in place, and not in a log or a
// pipe.
func stderrIsTerminal() bool { return isTerminal(os.Stderr) }

// progressf prints a progress note on stderr if it is a terminal.
func progressf(format string, args ...any) {
	if stderrIsTerminal() {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

// progress draws a bar for one mode on stderr, redrawn in place, if stderr
// is a terminal.
type progress struct {
	label, mode string
	total       int
	done        *atomic.Int64
	stop        chan struct{}
	stopped     chan struct{}
}

func startProgress(label, mode string, total int, done *atomic.Int64) *progress {
	p := &progress{label: label, mode: mode, total: total, done: done, stop: make(chan struct{}), stopped: make(chan struct{})}
	go p.run()
	return p
}

func (p *progress) line() string {
	n := int(p.done.Load())
	const width = 30
	fill := width * n / max(p.total, 1)
	return fmt.Sprintf("  %-10s [%s%s] %4d/%d", p.mode, strings.Repeat("#", fill), strings.Repeat(".", width-fill), n, p.total)
}

func (p *progress) run() {
	defer close(p.stopped)
	if !stderrIsTerminal() {
		<-p.stop
		return
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			fmt.Fprint(os.Stderr, "\r"+p.line())
		}
	}
}

func (p *progress) finish(elapsed time.Duration) {
	close(p.stop)
	<-p.stopped
	if stderrIsTerminal() {
		fmt.Fprint(os.Stderr, "\r"+p.line()+fmt.Sprintf(" %v\n", elapsed.Round(time.Millisecond)))
	}
}

// printTable prints one table per backend, each followed by its modes'
// latency histograms.
func printTable(out io.Writer, rows []demoRow, cfg demoConfig) {
	var last string
	var w *tabwriter.Writer
	from := 0 // the first row of the backend being printed
	for i, r := range rows {
		if r.Backend != last {
			if w != nil {
				w.Flush()
				fmt.Fprintln(out)
				printHistograms(out, rows[from:i])
				fmt.Fprintln(out)
			}
			from = i
			last = r.Backend
			fmt.Fprintf(out, "backend %s — stock %d, %d instances, %d buyers, %d requests per mode\n",
				r.Backend, cfg.stock, cfg.instances, cfg.buyers, cfg.requests)
			w = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "mode\trequests\tsold\tbusy\tsold out\tstale\terrors\tfinal stock\toversold\tlost\treq/s\tp50 ms\tp99 ms\t")
		}
		// A lost sale (stock taken, the buyer told an error) is not an
		// oversell: the column said their sum, "oversold 1" in lock mode
		// when its backend died mid-run (an adversary pass).
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t\n", r.Mode, r.Requests, r.Sold, r.Busy,
			r.SoldOut, r.Stale, r.Errors, r.FinalStock, r.Oversold, r.Lost, r.RPS, r.P50ms, r.P99ms)
	}
	if w != nil {
		w.Flush()
		fmt.Fprintln(out)
		printHistograms(out, rows[from:])
	}
}
