// Package faults is dlock's fault suite, Jepsen-style: worker processes
// contend on one lock name through the real dlock API while a controller
// injects faults (pausing a waiter or a holder, cutting a holder's traffic
// off, killing a holder or the server, killing a SQL connection, killing a
// cluster's leader), and an independent checker judges what the workers
// believed against what the backend promises.
//
// Each worker loops: Lock, report the grant (belief start = the moment Lock
// returned), write to the checker's store with the lease's token, hold a few
// ms, and report the end of its belief (the moment it decided to Unlock, or
// the moment Done closed, whichever came first). The checker is an HTTP
// endpoint on loopback served by the controller, not the lock's store; its
// fenced view rejects a write whose token is at or below the highest token
// seen from a different hold. Every process runs on one machine, so times are
// wall-clock UnixNano and comparable.
//
// Each worker reaches the store through its own loopback TCP proxy, which
// the controller can tell to drop traffic (without closing connections) and
// later heal.
//
// Workers contend through a Mutex, or (Backend.Lock; KindBackends,
// ElectionBackends) through an RWMutex (every third worker writes), a
// Semaphore of 2 permits, or as candidates of an Election (a hold is a
// term). The checker judges each kind by its own exclusion: readers may
// overlap, a writer may not; a semaphore never has more holders than
// permits; a loss comes before the next conflicting grant; tokens are
// judged by what the store must have ordered (a grant returned before
// another's Lock call began was made first).
//
// A loaded machine delays a process's timers as a short pause would: each
// worker reports the spans its process was not running (a goroutine that
// wakes every 10 ms reports each wake more than 3 ms late, which can
// measure a stall up to 10 ms short, never long), and a holder
// told of its loss after the next grant is excused, and then judged by
// fencing as a paused holder is, only if such stalls of its own process,
// from a loss margin before that grant to the moment it was told, add up
// to at least how late it was.
//
// A loaded machine starves the store's server too. The controller probes a
// store of one server directly (a trivial request every 50 ms, through no
// proxy), and the time an answer was late while the server's threads
// waited for a CPU is a store stall (see probeStore), which the liveness
// bounds, recovery and progress, leave out. The safety verdicts never use
// it; clusters and faults that act on the servers are not probed.
//
// The command faults/cmd/dlockfaults runs the suite (make faults) and writes
// docs/reliability.md; the package's test runs a bounded subset.
package faults
