package main_test

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock/dlock/internal/testserver"
)

// A waiting dlock run or elect says, with -v (a JSON event with -o json),
// what it waits for and who holds it; without -v, off a terminal, it says
// nothing, as before.
func TestWaitSaysWhoHolds(t *testing.T) {
	u := redisURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	holder, _ := startSupervised(t, ctx, "run", "--backend", u, "--label", "theholder", "waitshow")
	leader, _ := startSupervised(t, ctx, "elect", "--backend", u, "waitelect", "theleader")
	defer func() {
		for _, c := range []*exec.Cmd{holder, leader} {
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
	}()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-v", "--wait", "4s", "waitshow", "--", "true"}, `dlock: waiting for lock "waitshow" (held by theholder`},
		{[]string{"-o", "json", "-v", "run", "--wait", "4s", "waitshow", "--", "true"}, `{"event":"waiting","name":"waitshow","state":"(held by theholder`},
		{[]string{"elect", "-v", "--wait", "4s", "waitelect", "other", "--", "true"}, `dlock: waiting for the lead of election "waitelect" (led by theleader`},
		{[]string{"run", "--wait", "4s", "waitshow", "--", "true"}, ""},
	} {
		r := dlockCmd(t, nil, append([]string{"--backend", u}, tc.args...)...)
		if r.code != 3 {
			t.Errorf("%v: exit %d: %s; want 3", tc.args, r.code, r.stderr)
		}
		if tc.want == "" && strings.Contains(r.stderr, "waiting") || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: stderr %q; want %q", tc.args, r.stderr, tc.want)
		}
	}
	// Over three reads of the same holder, one line: its time left
	// changes at each, which is no news.
	r := dlockCmd(t, nil, "--backend", u, "run", "-v", "--wait", "12s", "waitshow", "--", "true")
	if n := strings.Count(r.stderr, "waiting for"); r.code != 3 || n != 1 {
		t.Errorf("a 12 s wait on one holder: exit %d, %d lines: %q; want 3, one line", r.code, n, r.stderr)
	}
}

// A wait on a store that goes silent says so: it said nothing until
// interrupted (an adversary pass). Interrupted, it exits as interrupted.
func TestWaitSaysStoreIsSilent(t *testing.T) {
	srv := testserver.Redis(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	holder, _ := startSupervised(t, ctx, "run", "--backend", "redis://"+srv.Addr(), "waitsilent")
	defer func() {
		_ = holder.Process.Signal(syscall.SIGTERM)
		_ = holder.Wait()
	}()
	p := testserver.NewProxy(t, srv.Addr())
	w := exec.CommandContext(ctx, bin, "run", "-v", "--backend", "redis://"+p.Addr(), "--connect-timeout", "1s", "waitsilent", "--", "true")
	out := &syncBuffer{}
	w.Stdout, w.Stderr = out, out
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor := func(s string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), s); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				_ = w.Process.Kill()
				_ = w.Wait()
				t.Fatalf("no %q in:\n%s", s, out.String())
			}
		}
	}
	waitFor(`waiting for lock "waitsilent" (held by`)
	p.Blackhole()
	waitFor(`waiting for lock "waitsilent": the store does not answer`)
	// Interrupted there, it ends as interrupted, within what is left in
	// flight: the waiter's own request (go-redis's 3 s read timeout: a
	// read ignores its context's cancellation), its bounded give-back of
	// its place in line (2 s), and room for a loaded machine. The wait
	// display's inspection in flight is not waited out
	// (TestStopWaitDoesNotWaitForTheStore).
	_ = w.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, w, 15*time.Second, out); code != 128+int(syscall.SIGTERM) || !strings.Contains(out.String(), "interrupted by terminated") {
		t.Errorf("exit %d:\n%s; want %d, interrupted", code, out.String(), 128+int(syscall.SIGTERM))
	}
}

// On a terminal the wait is one line, redrawn with the time waited, and
// cleared before the command's output.
func TestWaitLineOnTerminal(t *testing.T) {
	u := redisURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	holder := exec.CommandContext(ctx, bin, "run", "--backend", u, "waittty", "--", "sh", "-c", "echo held; sleep 8")
	hout := &syncBuffer{}
	holder.Stdout, holder.Stderr = hout, hout
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Wait() }()
	for !strings.Contains(hout.String(), "held") {
		time.Sleep(20 * time.Millisecond)
	}
	cmd, in, out := onTerminal(t, "exec "+bin+" run --backend "+u+" waittty -- sh -c 'echo started'")
	defer in.Close()
	_ = cmd.Wait()
	s := out.String()
	drawn := regexp.MustCompile(`\r\x1b\[Kdlock: waiting \d+s for lock "waittty" \(held by`).FindAllString(s, -1)
	if len(drawn) < 2 || !strings.Contains(s, "\r\x1b[Kstarted") {
		t.Errorf("terminal output %q; want the wait's line, redrawn, then cleared before the command's", s)
	}
}
