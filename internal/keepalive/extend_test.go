package keepalive

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
)

// renewDriver is a driver.Driver whose Renew is the test's; nothing else is
// called by the Scheduler.
type renewDriver struct {
	driver.Driver
	renew func(ctx context.Context, batch []driver.Held) []driver.RenewResult
}

func (d renewDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	return d.renew(ctx, batch)
}

// An Extend of a fixed hold whose store call is under way when the hold's
// deadline passes, and whose success is answered after a tick took the
// hold off the heap to declare it lost but before the loss was signalled:
// Extend must report the loss. Reporting success would tell the caller the
// lease was extended while it ends at its old expiry (seen under load in
// drivertest's Extend). Channels order the steps: the tick's lost callback
// waits for the Extend to answer.
func TestExtendAnsweredAfterTickFoundLoss(t *testing.T) {
	const ttl = 100 * time.Millisecond
	tickFound := make(chan struct{}) // the tick took e off the heap and calls lost
	answered := make(chan struct{})  // Extend returned
	extendErr := make(chan error, 1)
	lostErr := make(chan error, 1)
	d := renewDriver{renew: func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		<-tickFound // the store applied it; its answer comes after the tick
		return make([]driver.RenewResult, len(batch))
	}}
	var s *Scheduler
	s = NewScheduler(d, func(*Entry) driver.Held { return driver.Held{Name: "x", TTL: ttl} },
		func(e *Entry, err error) {
			close(tickFound)
			<-answered // the loss is signalled only after Extend answered
			s.Remove(e)
			lostErr <- err
		},
		func(*Entry, time.Duration, error) {})
	defer s.Stop()
	e := &Entry{TTL: ttl} // a fixed hold: lost at its deadline
	s.Add(e, time.Now(), ttl)
	go func() {
		_, err := s.Extend(context.Background(), e, 10*time.Second)
		extendErr <- err
		close(answered)
	}()
	if err := <-extendErr; !errors.Is(err, driver.ErrLeaseLost) {
		t.Errorf("Extend answered after a tick found the hold lost = %v; want ErrLeaseLost", err)
	}
	if err := <-lostErr; !errors.Is(err, driver.ErrLeaseLost) {
		t.Errorf("lost with %v; want ErrLeaseLost", err)
	}
}
