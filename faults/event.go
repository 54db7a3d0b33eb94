package faults

// Event kinds sent by workers.
const (
	kindWait  = "wait"  // about to call Lock
	kindGrant = "grant" // Lock returned a lease: belief starts (T)
	kindWrite = "write" // a protected write with the lease's token
	kindLong  = "long"  // the hold will last until loss (asked for by SIGUSR1)
	kindEnd   = "end"   // belief ends (T); LossAt set when Done closed first
	kindError = "error" // Lock failed (Msg)
	kindStall = "stall" // the worker's process ran late (T to Until): not scheduled, as in a loaded machine
)

// Event kinds recorded by the controller.
const (
	kindPause    = "pause"    // SIGSTOP of a worker
	kindResume   = "resume"   // SIGCONT of a worker
	kindKill     = "kill"     // kill -9 of a worker: its open hold ends here
	kindCut      = "cut"      // a worker's traffic to the store dropped
	kindHeal     = "heal"     // and forwarded again
	kindConnKill = "connkill" // the store killed a worker's connections
	kindSrvKill  = "srvkill"  // a server killed (Msg names it)
	kindSrvStart = "srvstart" // a server (re)started and ready
	kindFaultEnd = "faultend" // the injection is over: progress is timed from here
	kindInject   = "inject"   // the injection starts
	// kindStoreStall: the store answered the controller's probe late (T to
	// Until, see probeStore): liveness bounds do not count that time.
	kindStoreStall = "storestall"
)

// Event is one line of the history: what a worker did or believed, or what
// the controller injected. Times are wall-clock UnixNano.
type Event struct {
	Worker int    `json:"w"`
	Kind   string `json:"k"`
	Hold   int    `json:"h,omitempty"`   // the worker's hold number, from 1
	Token  uint64 `json:"tok,omitempty"` // the lease's fencing token
	T      int64  `json:"t"`             // when it happened, by the sender's clock
	LossAt int64  `json:"loss,omitempty"`
	Until  int64  `json:"until,omitempty"` // a stall's end
	Msg    string `json:"msg,omitempty"`
	// Mode is a grant's kind of hold: "" a mutex, "r" a read hold, "w" a
	// write hold, "p" a semaphore permit.
	Mode string `json:"mode,omitempty"`
	// RanOut: a grant whose lease, by its own clock, had no time left when
	// its belief was stamped. Lock never returns such a lease (it refuses
	// grants with less than a margin left), so the worker was held between
	// Lock's return and its stamp: by a pause, which the checker then
	// counts as the grant's.
	RanOut bool `json:"ranout,omitempty"`

	Recv     int64 `json:"recv,omitempty"` // when the checker received it
	Accepted bool  `json:"ok,omitempty"`   // writes: the fenced view took it
}

// holdID names one hold: a worker's hold number.
type holdID struct{ worker, hold int }

func (e Event) id() holdID { return holdID{e.Worker, e.Hold} }
