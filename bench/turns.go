package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"
)

// The turns method: each library in a process of its own, as in the
// isolated method, but all of a store's processes alive at once and taking
// turns (of d/turnSlices) as in the sliced method, at the parent's word. It
// keeps the sliced method's defence against drift without its shared
// heap and runtime, so comparing the three methods separates the two
// effects.

// turnSlices is how many turns each library takes in one run (-slices).
// Fewer than the sliced method's: a process that resumes after the others'
// turns runs slower for a while (dlock's Redis Lock+Unlock took 110 µs of
// CPU in turns of 150 ms, 74 µs in turns of 750 ms and in whole runs), so a
// turn must be long enough to make that small.
var turnSlices = 6

// serveTurns is the child's side: prepare the scenario, say "ready", then
// for every duration read from stdin run a turn and answer "ops errs
// nanoseconds" on stdout, until stdin closes.
func serveTurns(ctx context.Context, e *env, srv servers, scenario, store, library string) error {
	l, err := findLib(e, srv, store, library)
	if err != nil {
		return err
	}
	prep := throughputPreps[scenario]
	if prep == nil {
		return fmt.Errorf("scenario %q cannot take turns", scenario)
	}
	step, err := prep(ctx, *l)
	if err != nil {
		return err
	}
	if dir := os.Getenv("DLOCK_BENCH_CPUPROFILE"); dir != "" {
		stop, err := profileTo(dir, store, library)
		if err != nil {
			return err
		}
		defer stop()
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		d, err := time.ParseDuration(strings.TrimSpace(in.Text()))
		if err != nil {
			return err
		}
		a0, _ := gcSample()
		cpu0 := cpuTime()
		start := time.Now()
		ops, errs := step(ctx, d)
		took := time.Since(start)
		a1, _ := gcSample()
		fmt.Printf("%d %d %d %d %d\n", ops, errs, took.Nanoseconds(), int64(a1-a0), (cpuTime() - cpu0).Nanoseconds())
	}
	return in.Err()
}

// turnChild is the parent's handle on one serving child.
type turnChild struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// turnsRun makes one run of a throughput scenario for the libraries libs
// of one store, each in its own process, taking turns.
func turnsRun(ctx context.Context, srv servers, libs []lib, scenario string, d, warm time.Duration, failed []error) []run {
	exe, err := os.Executable()
	if err != nil {
		for j := range failed {
			failed[j] = err
		}
		return make([]run, len(libs))
	}
	children := make([]*turnChild, len(libs))
	defer func() {
		for _, c := range children {
			if c != nil {
				_ = c.in.Close()
				_ = c.cmd.Wait()
			}
		}
	}()
	alloc, cpu := make([]int64, len(libs)), make([]time.Duration, len(libs))
	ask := func(j int, c *turnChild, d time.Duration) (ops, errs int64, took time.Duration, err error) {
		if _, err = fmt.Fprintln(c.in, d); err != nil {
			return
		}
		if !c.out.Scan() {
			return 0, 0, 0, fmt.Errorf("child ended: %v", c.out.Err())
		}
		var ns, a, cns int64
		_, err = fmt.Sscan(c.out.Text(), &ops, &errs, &ns, &a, &cns)
		alloc[j] += a
		cpu[j] += time.Duration(cns)
		return ops, errs, time.Duration(ns), err
	}
	for j, l := range libs {
		if failed[j] != nil {
			continue
		}
		cmd := exec.CommandContext(ctx, exe, "-child", scenario, "-serve", "-store", l.store, "-lib", l.name,
			"-redis", srv.Redis, "-etcd", srv.Etcd, "-zk", srv.ZooKeeper, "-nats", srv.NATS)
		cmd.Stderr = os.Stderr
		in, err1 := cmd.StdinPipe()
		out, err2 := cmd.StdoutPipe()
		if err := errorsJoin(err1, err2, cmd.Start()); err != nil {
			failed[j] = err
			continue
		}
		c := &turnChild{cmd: cmd, in: in, out: bufio.NewScanner(out)}
		children[j] = c
		if !c.out.Scan() || c.out.Text() != "ready" {
			failed[j] = fmt.Errorf("%s: child did not get ready", l.name)
			continue
		}
		if warm > 0 {
			if _, _, _, err := ask(j, c, warm); err != nil {
				failed[j] = err
			}
			alloc[j], cpu[j] = 0, 0
		}
	}
	ops, errs := make([]int64, len(libs)), make([]int64, len(libs))
	spent := make([]time.Duration, len(libs))
	srvCPU := make([]time.Duration, len(libs)) // the server's CPU during each library's turns
	for range turnSlices {
		for j, c := range children {
			if c == nil || failed[j] != nil {
				continue
			}
			s0, _ := serverCPU(srv, libs[j].store)
			o, e, took, err := ask(j, c, d/time.Duration(turnSlices))
			s1, _ := serverCPU(srv, libs[j].store)
			srvCPU[j] += s1 - s0
			if err != nil {
				failed[j] = err
				continue
			}
			ops[j] += o
			errs[j] += e
			spent[j] += took
		}
	}
	rs := make([]run, len(libs))
	for j, l := range libs {
		if spent[j] > 0 {
			n := float64(max(ops[j], 1))
			rs[j] = run{ops: float64(ops[j]) / spent[j].Seconds(), errors: errs[j],
				allocPerOp: float64(alloc[j]) / n, cpuPerOp: float64(cpu[j].Microseconds()) / n}
			if srv.Etcd == "" || l.store != "etcd" { // embedded etcd's CPU is the parent's: not the server's alone
				rs[j].serverCPUPerOp = float64(srvCPU[j].Microseconds()) / n
			}
			fmt.Fprintf(os.Stderr, "  %-22s %.0f B/op, client CPU %.0f µs/op, server CPU in its turns %.0f µs/op\n",
				l.name, rs[j].allocPerOp, rs[j].cpuPerOp, float64(srvCPU[j].Microseconds())/n)
		}
	}
	return rs
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// profileTo starts a CPU profile of this child in dir, one file per store
// and library (DLOCK_BENCH_CPUPROFILE names dir); stop ends it.
func profileTo(dir, store, library string) (stop func(), err error) {
	name := strings.NewReplacer(" ", "_", "/", "_", "+", "").Replace(store + "-" + library)
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}
