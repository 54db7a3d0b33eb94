package faults

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// Checker is the store the workers write to, independent of the lock's
// store: a loopback HTTP endpoint that records every event with the time it
// arrived, and answers each write with the verdict of a fenced view (a write
// is rejected when its token is at or below the highest token seen from a
// different hold).
type Checker struct {
	URL string // where workers POST events

	srv *http.Server
	ln  net.Listener

	mu      sync.Mutex
	events  []Event
	maxTok  uint64
	maxHold holdID
	changed chan struct{} // closed and replaced on every event
}

// NewChecker starts a checker on a free loopback port.
func NewChecker() (*Checker, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &Checker{URL: "http://" + ln.Addr().String() + "/event", ln: ln, changed: make(chan struct{})}
	c.srv = &http.Server{Handler: http.HandlerFunc(c.serve), ReadHeaderTimeout: time.Minute}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// Close stops the endpoint.
func (c *Checker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil {
		return c.srv.Close()
	}
	return nil
}

func (c *Checker) serve(w http.ResponseWriter, r *http.Request) {
	var e Event
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e = c.add(e)
	_ = json.NewEncoder(w).Encode(e)
}

// add records e (stamping its arrival) and judges a write.
func (c *Checker) add(e Event) Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.Recv = time.Now().UnixNano()
	if e.Kind == kindWrite {
		if e.Token > c.maxTok || (e.Token == c.maxTok && e.id() == c.maxHold) {
			e.Accepted = true
			c.maxTok, c.maxHold = e.Token, e.id()
		}
	}
	c.events = append(c.events, e)
	close(c.changed)
	c.changed = make(chan struct{})
	return e
}

// Record adds an event of the controller's (a fault injected or healed).
func (c *Checker) Record(worker int, kind, msg string) {
	c.add(Event{Worker: worker, Kind: kind, T: time.Now().UnixNano(), Msg: msg})
}

// Events returns a copy of the history so far.
func (c *Checker) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...)
}

// errTimeout is returned by Await when nothing matched in time.
var errTimeout = errors.New("faults: timed out waiting for an event")

// Await waits until some event at index >= from satisfies match, and
// returns it.
func (c *Checker) Await(ctx context.Context, from int, match func(Event) bool) (Event, error) {
	for {
		c.mu.Lock()
		for i := from; i < len(c.events); i++ {
			if match(c.events[i]) {
				e := c.events[i]
				c.mu.Unlock()
				return e, nil
			}
		}
		from = len(c.events)
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Event{}, errTimeout
		}
	}
}

// Len is the number of events so far (a starting point for Await).
func (c *Checker) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

// Holder returns the worker that holds the lock as far as the history shows
// (its last grant not yet ended), if any.
func (c *Checker) Holder() (worker int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := map[int]string{}
	for _, e := range c.events {
		switch e.Kind {
		case kindGrant, kindEnd, kindWait, kindKill:
			last[e.Worker] = e.Kind
		}
	}
	for w, k := range last {
		if k == kindGrant {
			return w, true
		}
	}
	return 0, false
}

// Waiters returns the workers whose last event is a wait that began at least
// minAge ago.
func (c *Checker) Waiters(minAge time.Duration) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := map[int]Event{}
	for _, e := range c.events {
		switch e.Kind {
		case kindGrant, kindEnd, kindWait, kindKill, kindError:
			last[e.Worker] = e
		}
	}
	cut := time.Now().Add(-minAge).UnixNano()
	var ws []int
	for w, e := range last {
		if e.Kind == kindWait && e.T <= cut {
			ws = append(ws, w)
		}
	}
	return ws
}

// LongHolders returns the workers in a long hold (announced, not ended).
func (c *Checker) LongHolders() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	long := map[holdID]bool{}
	for _, e := range c.events {
		switch e.Kind {
		case kindLong:
			long[e.id()] = true
		case kindEnd:
			delete(long, e.id())
		case kindKill:
			for id := range long {
				if id.worker == e.Worker {
					delete(long, id)
				}
			}
		}
	}
	var ws []int
	for id := range long {
		ws = append(ws, id.worker)
	}
	return ws
}
