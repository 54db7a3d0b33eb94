package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/dlock/dlock"
	"github.com/spf13/cobra"
)

func topCmd() *cobra.Command {
	var interval time.Duration
	var iterations int
	cmd := &cobra.Command{
		Use:   "top [PREFIX]",
		Short: "A live view of the locks under a prefix, most contended first",
		Long: `top shows the locks held under PREFIX (all without one) and refreshes every
--interval until Ctrl-C: holder, kind, token, time left and waiters as in
dlock ls, and from successive samples each lock's acquisitions per second
and an estimate of the wait. Most contended first: most waiters, then most
acquisitions per second.

ACQ/S counts new fencing tokens over the last 10 s. Redis, mem, PostgreSQL
and MySQL number each lock's holds, so every acquisition between two samples
counts; etcd's and ZooKeeper's tokens are store-wide revisions, so there a
change of holder counts once however many came between samples.
WAIT is the waiters divided by the acquisition rate (Little's law: the mean
time a waiter spends in the queue); ">12s" means waiters have been queued
for 12 s with no acquisition. Where the store keeps no record of waiters
(the SQL table modes, MySQL, mem) WAITERS shows "—", and a line under the
table says why; dlockotel's dlock.lock.waiting gauge counts each process's
own waiting calls.

With -o json, top prints one JSON object per sample, on one line: time,
backend, prefix, held, waiting, and locks (each as in ls -o json, with
acq_per_s and wait_ms; wait_at_least is true when wait_ms is how long
waiters have gone unserved), or error when a sample failed. A first sample
that fails (a backend that cannot list, a missing right) ends top with
exit status 1 before anything is drawn.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval < 100*time.Millisecond {
				return fail(exitUsage, "--interval must be at least 100ms")
			}
			if iterations < 0 {
				return fail(exitUsage, "--iterations must not be negative (0: until Ctrl-C)")
			}
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			c, err := openBackend(ctx, "")
			if err != nil {
				return err
			}
			defer closeBackend(c)
			w := cmd.OutOrStdout()
			tty := writerIsTerminal(w)
			st := newTopState(c.Backend())
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for n := 0; iterations == 0 || n < iterations; n++ {
				if n > 0 {
					select {
					case <-ctx.Done():
						return nil
					case <-tick.C:
					}
				}
				sctx, cancel := context.WithTimeout(ctx, max(interval, 5*time.Second))
				infos, err := c.List(sctx, prefix)
				cancel()
				if ctx.Err() != nil {
					return nil
				}
				if err != nil && n == 0 {
					// Nothing drawn yet: fail as ls does (an unsupported
					// backend, a missing right, no answer).
					return fail(exitFailed, "%v", err)
				}
				now := time.Now()
				var rows []topRow
				if err == nil {
					rows = st.update(infos, now)
				}
				if jsonOutput() {
					if err := printTopJSON(w, c.Backend(), prefix, now, rows, err); err != nil {
						return err
					}
					continue
				}
				if tty {
					// Home, clear, and a frame cut to the terminal's width
					// and height, as top and htop do: a row that wrapped
					// would scroll the title away.
					var frame strings.Builder
					renderTop(&frame, c.Backend(), prefix, interval, now, rows, err)
					cols, lines := terminalSize(w.(*os.File))
					fmt.Fprint(w, "\x1b[H\x1b[2J"+fitScreen(frame.String(), cols, lines))
					continue
				} else if n > 0 {
					fmt.Fprintln(w)
				}
				renderTop(w, c.Backend(), prefix, interval, now, rows, err)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "time between samples")
	cmd.Flags().IntVarP(&iterations, "iterations", "n", 0, "stop after this many samples (0: until Ctrl-C)")
	return cmd
}

// writerIsTerminal reports whether w is a terminal.
func writerIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

// topWindow is how far back ACQ/S looks.
const topWindow = 10 * time.Second

// topRow is one lock of a top frame.
type topRow struct {
	info    dlock.Info
	rate    float64       // acquisitions per second over the window
	wait    time.Duration // estimated wait (Little's law), or how long waiters have gone unserved
	waitMin bool          // wait is a lower bound: waiters and no acquisition yet
}

type topPoint struct {
	at    time.Time
	total uint64 // acquisitions counted since the first sample
}

type topLock struct {
	token   uint64
	total   uint64
	hist    []topPoint // within topWindow, oldest first
	queued  time.Time  // when waiters were first seen with no acquisition since; zero if none
	present bool
}

// topState derives rates and waits from successive List samples.
type topState struct {
	perName bool // tokens count each lock's holds (not store-wide revisions)
	locks   map[string]*topLock
	first   bool
}

func newTopState(backend string) *topState {
	perName := true
	switch backend {
	case "etcd", "etcds", "zk":
		perName = false
	}
	return &topState{perName: perName, locks: map[string]*topLock{}, first: true}
}

// update takes a sample taken at now and returns the frame's rows, most
// contended first.
func (s *topState) update(infos []dlock.Info, now time.Time) []topRow {
	for _, l := range s.locks {
		l.present = false
	}
	rows := make([]topRow, 0, len(infos))
	for _, i := range infos {
		l := s.locks[topKey(i)]
		if l == nil {
			l = &topLock{}
			s.locks[topKey(i)] = l
			if !s.first { // appeared since the last sample: at least one acquisition
				l.total = 1
			}
		} else if i.Token != l.token {
			switch {
			case s.perName && i.Token > l.token:
				l.total += i.Token - l.token
			default:
				l.total++
			}
		}
		acquired := len(l.hist) > 0 && l.total != l.hist[len(l.hist)-1].total
		l.token, l.present = i.Token, true
		l.hist = append(l.hist, topPoint{now, l.total})
		for len(l.hist) > 1 && now.Sub(l.hist[0].at) > topWindow {
			l.hist = l.hist[1:]
		}
		r := topRow{info: i}
		if span := now.Sub(l.hist[0].at); span > 0 {
			r.rate = float64(l.total-l.hist[0].total) / span.Seconds()
		}
		switch { // queued: since when the waiters have had no acquisition
		case i.Waiters == 0:
			l.queued = time.Time{}
		case acquired || l.queued.IsZero():
			l.queued = now
		}
		if i.Waiters > 0 {
			if r.rate > 0 {
				r.wait = time.Duration(float64(i.Waiters) / r.rate * float64(time.Second))
			} else {
				r.wait, r.waitMin = now.Sub(l.queued), true
			}
		}
		rows = append(rows, r)
	}
	s.first = false
	sort.SliceStable(rows, func(a, b int) bool {
		ra, rb := rows[a], rows[b]
		if ra.info.Waiters != rb.info.Waiters {
			return ra.info.Waiters > rb.info.Waiters
		}
		if ra.rate != rb.rate {
			return ra.rate > rb.rate
		}
		return topKey(ra.info) < topKey(rb.info)
	})
	return rows
}

// topKey tells a name's locks apart: its Mutex (or election), read-write
// lock and semaphore are three locks, with their own tokens.
func topKey(i dlock.Info) string {
	switch i.Kind {
	case dlock.KindShared, dlock.KindWrite:
		return i.Name + "\x00rw"
	case dlock.KindPermit:
		return i.Name + "\x00sem"
	}
	return i.Name
}

func renderTop(w io.Writer, backend, prefix string, interval time.Duration, now time.Time, rows []topRow, err error) {
	scope := "all locks"
	if prefix != "" {
		scope = fmt.Sprintf("prefix %q", prefix)
	}
	waiting := 0
	for _, r := range rows {
		waiting += r.info.Waiters
	}
	fmt.Fprintf(w, "dlock top - %s - %s - %d held, %d waiting - %s (every %v; Ctrl-C quits)\n\n",
		backend, scope, len(rows), waiting, now.Format("15:04:05"), interval)
	if err != nil {
		fmt.Fprintf(w, "error: %s\n", esc(err.Error()))
		return
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "no locks held")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOLDER\tKIND\tTOKEN\tLEFT\tWAITERS\tACQ/S\tWAIT")
	for _, r := range rows {
		wait := "-"
		if r.info.Waiters > 0 && r.wait > 0 {
			wait = left(r.wait)
			if r.waitMin {
				wait = ">" + left(r.wait)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%.1f\t%s\n", esc(r.info.Name), holderOf(r.info), kindOf(r.info),
			r.info.Token, left(r.info.TTL), waitersOf(r.info), r.rate, wait)
	}
	_ = tw.Flush()
	infos := make([]dlock.Info, len(rows))
	for i, r := range rows {
		infos[i] = r.info
	}
	printUncounted(w, infos)
}

// topJSON is one sample of `dlock top -o json`.
type topJSON struct {
	Time    time.Time     `json:"time"`
	Backend string        `json:"backend"`
	Prefix  string        `json:"prefix"`
	Held    int           `json:"held"`
	Waiting int           `json:"waiting"`
	Locks   []topLockJSON `json:"locks"`
	Error   string        `json:"error,omitempty"`
}

// topLockJSON is a lock of a top sample: ls -o json's fields, the
// acquisition rate and the estimated wait.
type topLockJSON struct {
	lsJSON
	AcqPerS     float64 `json:"acq_per_s"`
	WaitMs      int64   `json:"wait_ms"`
	WaitAtLeast bool    `json:"wait_at_least"`
}

func printTopJSON(w io.Writer, backend, prefix string, now time.Time, rows []topRow, err error) error {
	j := topJSON{Time: now.UTC(), Backend: backend, Prefix: prefix, Locks: []topLockJSON{}}
	if err != nil {
		j.Error = err.Error()
	}
	infos := make([]dlock.Info, len(rows))
	for i, r := range rows {
		infos[i] = r.info
	}
	for i, l := range lsJSONOf(infos) {
		r := rows[i]
		j.Locks = append(j.Locks, topLockJSON{lsJSON: l, AcqPerS: r.rate, WaitMs: r.wait.Milliseconds(), WaitAtLeast: r.waitMin})
		j.Waiting += r.info.Waiters
	}
	j.Held = len(rows)
	return json.NewEncoder(w).Encode(j)
}

// fitScreen cuts text to cols columns (counting runes: top's text has no
// wide characters, and what comes from the store is escaped) and to the
// first rows-1 lines, leaving the last row for the cursor; 0 leaves that
// side as it is.
func fitScreen(text string, cols, rows int) string {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if rows > 1 && len(lines) > rows-1 {
		lines = lines[:rows-1]
	}
	for i, l := range lines {
		if cols > 0 && utf8.RuneCountInString(l) > cols {
			r := []rune(l)
			lines[i] = string(r[:cols])
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
