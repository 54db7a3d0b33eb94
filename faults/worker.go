package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dlock/dlock"
)

// WorkerConfig is what one worker process is told by the controller.
type WorkerConfig struct {
	ID      int           // the worker's number
	URL     string        // the backend URL (through the worker's proxies)
	Name    string        // the lock name
	TTL     time.Duration // the lease TTL
	Hold    time.Duration // how long a normal hold lasts
	LongMax time.Duration // a long hold (SIGUSR1) ends by this, lost or not
	Checker string        // the checker's URL
	// Lock is the kind of lock contended for: "" a Mutex, "rw" an RWMutex
	// (every third worker writes, the others read), "semaphore" a Semaphore
	// of Permits, "election" an Election (a hold is a term: the worker
	// campaigns, leads, then resigns).
	Lock    string
	Permits int
}

// mode is the kind of hold this worker takes ("" a mutex, see Event.Mode)
// and how it takes it.
func (cfg WorkerConfig) locker(c *dlock.Client) (string, dlock.Locker) {
	switch cfg.Lock {
	case "rw":
		rw := c.RWMutex(cfg.Name, dlock.WithTTL(cfg.TTL))
		if cfg.ID%3 == 0 {
			return "w", rw
		}
		return "r", rw.RLocker()
	case "semaphore":
		return "p", c.Semaphore(cfg.Name, cfg.Permits, dlock.WithTTL(cfg.TTL)).Locker()
	case "election":
		return "", candidate{c.Election(cfg.Name, dlock.WithTTL(cfg.TTL)), fmt.Sprintf("worker-%d", cfg.ID)}
	}
	return "", c.Mutex(cfg.Name, dlock.WithTTL(cfg.TTL))
}

// RunWorker is a worker process's loop, until SIGTERM/SIGINT or ctx ends.
// SIGUSR1 makes the current hold (or the next) last until the lease is
// lost, SIGUSR2 arrives, or LongMax has passed.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var long atomic.Bool
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, sigLong, sigRelease)
	defer signal.Stop(sigs)
	release := make(chan struct{}, 1)
	go func() {
		for sig := range sigs {
			long.Store(sig == sigLong) // a release also cancels a pending request
			if sig == sigRelease {
				select {
				case release <- struct{}{}:
				default:
				}
			}
		}
	}()

	w := &worker{cfg: cfg, http: &http.Client{Timeout: 10 * time.Second}, release: release}
	go w.watchStalls(ctx)
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := dlock.Open(octx, cfg.URL)
	cancel()
	if err != nil {
		return fmt.Errorf("faults: worker %d: open: %w", cfg.ID, err)
	}
	defer c.Close()
	mode, m := cfg.locker(c)
	w.mode = mode
	for hold := 1; ctx.Err() == nil; {
		w.send(Event{Kind: kindWait})
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		l, err := m.Lock(lctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				w.send(Event{Kind: kindError, Msg: err.Error()})
				sleep(ctx, 20*time.Millisecond)
			}
			continue
		}
		w.hold(ctx, l, hold, &long)
		hold++
	}
	return nil
}

// candidate is a Locker whose holds are an election's terms: Lock
// campaigns, and the term's lease (whose Unlock resigns) is the hold, so a
// paused or cut-off holder is a paused or cut-off leader.
type candidate struct {
	e     *dlock.Election
	value string
}

func (c candidate) Lock(ctx context.Context) (*dlock.Lease, error) {
	t, err := c.e.Campaign(ctx, c.value)
	if err != nil {
		return nil, err
	}
	return t.Lease(), nil
}

func (c candidate) TryLock(ctx context.Context) (*dlock.Lease, error) { return c.Lock(ctx) }

// worker sends events to the checker.
type worker struct {
	cfg     WorkerConfig
	http    *http.Client
	release chan struct{} // SIGUSR2: end a long hold
	mode    string        // the kind of hold it takes (Event.Mode)
}

// writes reports whether the worker's holds write to the fenced resource:
// a mutex's and a writer's do; readers and permit holders share it.
func (w *worker) writes() bool { return w.mode == "" || w.mode == "w" }

// hold runs one hold: grant, writes, belief end, Unlock.
func (w *worker) hold(ctx context.Context, l *dlock.Lease, hold int, long *atomic.Bool) {
	start := time.Now().UnixNano()
	ranOut := l.TimeLeft() <= 0
	var lossAt atomic.Int64 // when Done was first seen closed
	noteLoss := func() { lossAt.CompareAndSwap(0, time.Now().UnixNano()) }
	watched, unwatch := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-l.Done():
			noteLoss()
		case <-unwatch:
		}
	}()
	tok := l.Token()
	w.send(Event{Kind: kindGrant, Hold: hold, Token: tok, T: start, Mode: w.mode, RanOut: ranOut})
	w.write(hold, tok)
	if long.Swap(false) {
		select {
		case <-w.release: // an old one
		default:
		}
		w.send(Event{Kind: kindLong, Hold: hold, Token: tok})
		until := time.NewTimer(w.cfg.LongMax)
		tick := time.NewTicker(50 * time.Millisecond)
	loop:
		for {
			select {
			case <-l.Done():
				noteLoss()
				break loop
			case <-until.C:
				break loop
			case <-w.release:
				break loop
			case <-ctx.Done():
				break loop
			case <-tick.C:
				w.write(hold, tok)
			}
		}
		until.Stop()
		tick.Stop()
	} else {
		select {
		case <-l.Done():
			noteLoss()
		case <-time.After(w.cfg.Hold):
		case <-ctx.Done():
		}
	}
	select {
	case <-l.Done(): // a careful holder does not write once told
		noteLoss()
	default:
		w.write(hold, tok)
	}
	end := time.Now().UnixNano()
	select {
	case <-l.Done():
		noteLoss()
	default:
	}
	loss := lossAt.Load() // a loss after the decision to unlock is Unlock's
	if loss != 0 && loss < end {
		end = loss
	} else {
		loss = 0
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*w.cfg.TTL)
	err := l.Unlock(uctx)
	cancel()
	msg := ""
	if err != nil {
		msg = "unlock: " + err.Error()
	}
	close(unwatch)
	<-watched
	w.send(Event{Kind: kindEnd, Hold: hold, Token: tok, T: end, LossAt: loss, Msg: msg})
}

// write makes a protected write with the hold's token, if the worker's
// holds write.
func (w *worker) write(hold int, tok uint64) {
	if w.writes() {
		w.send(Event{Kind: kindWrite, Hold: hold, Token: tok})
	}
}

// send posts e to the checker, stamped with the worker and (unless set)
// the time. Failures are ignored: the checker outlives the workers.
func (w *worker) send(e Event) {
	e.Worker = w.cfg.ID
	if e.T == 0 {
		e.T = time.Now().UnixNano()
	}
	b, _ := json.Marshal(e)
	resp, err := w.http.Post(w.cfg.Checker, "application/json", bytes.NewReader(b))
	if err == nil {
		_ = resp.Body.Close()
	}
}

// Stall sampling: a goroutine that sleeps stallTick at a time reports each
// wake later than stallMin past its due time as a stall, the span the
// process was not running its goroutines (a loaded machine's scheduler, not
// dlock): the checker excuses a loss told late only by stalls at least as
// long as it was late. A stall that begins during a sleep is measured from
// the wake's due time, so up to stallTick short: never an excuse too long.
// The tick was 2 ms; six workers each waking 500 times a second so slowed
// them on a busy 2-core machine that the PostgreSQL scenarios made no
// progress for seconds (they pass with no watcher, and with 10 ms).
const (
	stallTick = 10 * time.Millisecond
	stallMin  = 3 * time.Millisecond
)

// watchStalls reports the worker's stalls until ctx ends.
func (w *worker) watchStalls(ctx context.Context) {
	t := time.NewTimer(stallTick)
	defer t.Stop()
	due := time.Now().Add(stallTick)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if now.Sub(due) > stallMin {
			w.send(Event{Kind: kindStall, T: due.UnixNano(), Until: now.UnixNano()})
			now = time.Now() // the report's own time is no stall
		}
		due = now.Add(stallTick)
		t.Reset(stallTick)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
