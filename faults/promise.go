package faults

import (
	"strings"
	"time"
)

// Promise is what the docs (README's table, the package docs) promise for a
// backend under a fault: which verdicts are judged, and their bounds.
type Promise struct {
	// Exclusive: belief intervals never overlap, except a holder's that the
	// fault itself excuses (paused past its TTL; its connection killed, or
	// the server, in a SQL row/session mode, which the package docs call a
	// window covered by fencing).
	Exclusive bool
	// Fenced: an excused overlap must be ordered by tokens, so the fenced
	// view rejects the stale holder's writes (backends whose tokens the
	// README calls safe).
	Fenced bool
	// Tokens: no token regressions (tokens survive this fault).
	Tokens bool
	// LossFirst: a holder's Done closes before the next holder's grant.
	LossFirst bool
	// Recovery bounds the time from a holder's death or a leader's kill to
	// the next grant (0: not judged).
	Recovery time.Duration
	// Progress bounds the time from the fault's end to the next grant.
	Progress time.Duration
}

// Election times of the clusters the suite starts: etcd's default election
// timeout (1 s); ZooKeeper's ensemble with tickTime 250 ms elects within
// about 2 s.
const (
	etcdElection = time.Second
	zkElection   = 2 * time.Second
	natsElection = 9 * time.Second // nats-server's longest Raft election timeout
)

func promiseOf(b *Backend, f *Fault, ttl time.Duration, st *Store) Promise {
	p := Promise{Exclusive: true, Fenced: b.TokensSafe, Tokens: true, LossFirst: true, Progress: ttl + 2*time.Second}
	dataLost := false
	switch f {
	case RestartServer:
		dataLost = st != nil && !st.Persistent
	case RedlockMajority:
		dataLost = true // a majority restarts without its data
	case KillHolder, BlackholeHolder:
		p.Recovery = ttl + time.Second // a cut-off holder is dead to the store
	case KillLeader:
		if strings.HasPrefix(b.Store, "etcd") {
			p.Recovery = etcdElection + 2*time.Second
		} else if strings.HasPrefix(b.Store, "nats") {
			// The killed node comes back at TTL + 1 s, often before the
			// stream's new leader is elected (4–9 s): the next grant is
			// judged against the election, from the kill, not the restart.
			p.Recovery = natsElection + 2*time.Second
			p.Progress = max(p.Progress, p.Recovery)
		} else {
			p.Recovery = zkElection + 2*time.Second
		}
	}
	if dataLost {
		// The lock and the token counter go with the data: the README
		// promises neither (Redis without fsync'd AOF, Memcached, Redlock
		// with a majority restarted empty).
		p.Exclusive, p.LossFirst, p.Tokens = false, false, false
		if f == RedlockMajority {
			// Every node is down past the holder's TTL, so it is told
			// before anyone can be granted again.
			p.Exclusive, p.LossFirst = true, true
		}
	}
	return p
}

// String is the promise in words, for the report.
func (p Promise) String() string {
	var s []string
	if p.Exclusive {
		s = append(s, "no overlap")
	} else {
		s = append(s, "overlap allowed")
	}
	if p.Fenced {
		s = append(s, "excused overlaps fenced")
	}
	if p.LossFirst {
		s = append(s, "loss before next grant")
	}
	if p.Tokens {
		s = append(s, "tokens increase")
	}
	if p.Recovery > 0 {
		s = append(s, "next grant ≤ "+p.Recovery.String())
	}
	return strings.Join(s, "; ")
}
