package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/dlock/dlock/faults"
)

// writeDoc rewrites docs/reliability.md with the results.
func writeDoc(path string, cfg faults.Config, results []faults.Result, took time.Duration) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, `# Reliability: dlock under faults

This file is written by the fault suite (package [faults](../faults), command
`+"`faults/cmd/dlockfaults`"+`): re-run it with

`+"```sh"+`
make faults                                        # the full suite, rewrites this file (about 35 minutes)
go run ./faults/cmd/dlockfaults -backends redis,zk -faults pause-waiter   # a part of it, printed only
go test -race -count=1 ./faults/                   # the bounded subset CI runs (every backend × pause-waiter, blackhole-holder)
`+"```"+`

## How it works

For each backend × fault, %d worker *processes* (the suite's own binary, re-executed) contend on
one lock name through the real dlock API (`+"`dlock.Open`"+` with the backend's URL, TTL %v). Each worker
loops: `+"`Lock`"+`; belief starts when `+"`Lock`"+` returns; a write carrying its token goes to the checker;
it holds %v; belief ends when it decides to `+"`Unlock`"+` or when `+"`Done()`"+` closes, whichever comes
first. The checker is an HTTP endpoint on loopback in the controller, not the lock's store; its
fenced view rejects a write whose token is at or below the highest token seen from a different
hold. Every worker reaches the store through its own loopback TCP proxy, which can cut it off as
a partition would: nothing is forwarded, not even a close, and connections stay open; on healing,
what was held back is delivered, as TCP's retransmissions would. Servers are real (internal/testserver: loopback, temp dirs). Each
fault is injected %d times per backend.

Faults: **pause-waiter** (SIGSTOP a worker waiting in Lock for TTL + 1 s), **blackhole-holder**
(drop the holder's traffic for TTL + 2 s, then heal), **pause-holder** (SIGSTOP the holder for TTL +
1 s), **kill-holder** (kill -9, a new worker takes its place), **restart-server** (kill -9 the server
and restart it on its data; Redis without persistence, so empty), **restart-server-aof** (Redis with
`+"`appendfsync always`"+`), **kill-connection** (pg_terminate_backend / KILL of the holder's
connections), **kill-leader** (a 3-member etcd cluster, a 3-server ZooKeeper ensemble; restarted
after TTL + 1 s; the next injection waits until every ZooKeeper member serves again, so each is one
failure), **redlock-minority** / **redlock-majority** (1 or 2 of 3 masters down for TTL + 1
s, back empty), **redlock-restart-empty** (one master killed and restarted empty at once). During a
pause or a blackhole the target holder is asked (SIGUSR1) to hold until its lease is lost, writing
every 50 ms, as a long job would.

Verdicts: **overlaps** of belief intervals must be 0, except a holder's paused past its TTL (and, in
SQL row/session modes, a holder whose connection was killed or whose server was restarted, a window
the package docs say fencing covers): those are *excused*, and on backends whose tokens the README calls safe they must be
ordered by token (*unfenced* = 0), so the fenced view rejects the stale holder's writes. **Loss
margin**: a holder whose lease was lost must see `+"`Done()`"+` before the next holder's grant (late = 0).
**Store stalls**: a loaded machine starves the store's server as it starves a worker. On
2026-11-30, under `+"`make test-busy`"+`'s load, PostgreSQL's backends waited 1–1.7 s on the run queue
for 40–65 ms of CPU, and the transaction holding a semaphore's state row ran one statement for
1.7 s, waiting on no lock, while every other acquire queued behind it; no lock can be granted
then, whatever the lock does. So the controller sends a store of one server a trivial request
(`+"`PING`, `SELECT 1`"+`, a get of a missing key, a NATS flush) every 50 ms, on a connection of its own
that goes through no proxy. An answer that takes over 30 ms is a wait on the store, from 10 ms
after the send to the answer, less any stall of the controller's own process in it; the kernel's
count of the time the server's threads waited for a CPU (`+"`/proc/PID/task/TID/schedstat`"+`, the most
of any one thread between the send and the answer) says how much of it was starvation, and the
smaller of the two, over 20 ms, is a *store stall*. A store that is slow because it is busy (a
heavy script, a client's hot loop) or stopped runs or sleeps rather than waits for a CPU, and is
excused only the time it also waited for one. **Recovery** and **progress** leave the store's
stalls out, at most half the bound's worth (a stall need not be what held a grant up: a waiter
asleep on a timer of its own is no faster for a store that answers), and after a holder's death
only those past its TTL (its lease runs out by the store's clock all the same). The table gives
the stalled time left out as "(+N)", and a bound met only that way says so in the verdict column
("pass (progress … met leaving out … ms of store stalls)"). No safety verdict uses them. Not
probed: clusters (Redlock, etcd, ZooKeeper and NATS with three members grant with a quorum, so
one slow member need not hold a grant up) and faults that act on the servers (restarts,
kill-leader, Redlock's), where a slow answer is the fault's own.
**Recovery**: the next grant after a holder's kill or cut-off (dead, to the store) within TTL + 1 s; after a leader's kill within
the store's election time + 2 s (etcd 1 s, ZooKeeper 2 s). **Progress**: a grant within TTL + 2 s of
the fault's end. **Token regressions**: 0 where tokens survive the fault (not after Redis or Memcached
restart empty, or a Redlock majority restarted empty; there, exclusion is not promised either). **Dead
grants**: no lease lost within 20 ms of its grant without a fault to explain it. Times are wall
clock on one machine; figures are over all injections; *overlaps* counts overlapping pairs of holds.
The machine running the suite may be shared: a loaded machine stretches every time in the table.

## Results

Run of %s (%s/%s, %d CPUs), %v.

`, cfg.Workers, cfg.TTL, cfg.Hold, cfg.Rounds, time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), took.Round(time.Second))
	faults.WriteTable(&b, results)
	return os.WriteFile(path, b.Bytes(), 0o644)
}
