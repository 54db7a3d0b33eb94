package drivertest

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/dlock/dlock"
)

// ErrCut is what a Cutter's dialer returns once it has been cut.
var ErrCut = errors.New("drivertest: connections cut")

// Cutter is a dialer for harnesses whose connections can all be cut at
// once, as if the process using them had died: it closes every connection
// it made and refuses new ones. Its methods fit the dialer hooks of the
// store clients (net, gRPC, go-zookeeper, go-sql-driver).
type Cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

// Dial dials like net.Dialer.DialContext.
func (c *Cutter) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, ErrCut
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

// DialAddr dials TCP (gRPC's and go-sql-driver's hook).
func (c *Cutter) DialAddr(ctx context.Context, addr string) (net.Conn, error) {
	return c.Dial(ctx, "tcp", addr)
}

// DialTimeout dials with a timeout (go-zookeeper's hook).
func (c *Cutter) DialTimeout(network, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.Dial(ctx, network, addr)
}

// Cut closes every connection and refuses new ones.
func (c *Cutter) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// Clients remembers the Cutter of each client a harness opened. Embedded in
// a harness, it provides Harness.Cut.
type Clients struct {
	mu      sync.Mutex
	cutters map[*dlock.Client]*Cutter
}

// Track records that c's connections go through cu.
func (cs *Clients) Track(c *dlock.Client, cu *Cutter) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.cutters == nil {
		cs.cutters = map[*dlock.Client]*Cutter{}
	}
	cs.cutters[c] = cu
}

// Opened finishes a harness's NewClient: when err is nil it tracks c, whose
// connections go through cu, and returns it; otherwise it runs undo (which
// frees what the failed open took, such as the store client it was given;
// nil: nothing to free) and returns err.
func (cs *Clients) Opened(c *dlock.Client, cu *Cutter, err error, undo func()) (*dlock.Client, error) {
	if err != nil {
		if undo != nil {
			undo()
		}
		return nil, err
	}
	cs.Track(c, cu)
	return c, nil
}

// Cut cuts c's connections.
func (cs *Clients) Cut(_ context.Context, c *dlock.Client) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cu := cs.cutters[c]
	if cu == nil {
		return errors.New("drivertest: client not opened by this harness")
	}
	cu.Cut()
	return nil
}

// RemoveWith removes a lock behind its holder's back with ForceUnlock from a
// client of its own: Harness.Remove for backends that can force-release.
func RemoveWith(ctx context.Context, newClient func(context.Context) (*dlock.Client, error), name string) error {
	c, err := newClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.ForceUnlock(ctx, name)
}
