package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// dlock elect runs its command only while leading, with the term as
// DLOCK_TOKEN, and dlock elect --observe -o json prints each leader once, in
// term order.
func TestElectAndObserve(t *testing.T) {
	u := redisURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	obs := exec.CommandContext(ctx, bin, "elect", "--backend", u, "--observe", "sched", "-o", "json")
	out := &syncBuffer{}
	obs.Stdout = out
	if err := obs.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = obs.Process.Kill(); _ = obs.Wait() }()

	// A leads (and holds the lead for 1s); B campaigns meanwhile and leads
	// once A's command exits and A resigns.
	a := exec.CommandContext(ctx, bin, "elect", "--backend", u, "sched", "host-a", "--",
		"sh", "-c", `echo "A $DLOCK_NAME $DLOCK_VALUE $DLOCK_TOKEN"; sleep 1; exit 7`)
	aout := &syncBuffer{}
	a.Stdout, a.Stderr = aout, aout
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(aout.String(), "A ") {
		time.Sleep(20 * time.Millisecond)
	}
	// B leads for 1s: Observe on Redis reads every 200ms and reports only
	// terms that last longer than that.
	r := dlockCmd(t, nil, "elect", "--backend", u, "sched", "host-b", "--", "sh", "-c", `echo "B $DLOCK_TOKEN"; sleep 1`)
	if r.code != 0 || r.stdout != "B 2\n" {
		t.Fatalf("elect B: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	err := a.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 || aout.String() != "A sched host-a 1\n" {
		t.Fatalf("elect A: %v, output %q; want exit 7 and its line", err, aout.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "\n") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a repeated leader would show by now
	type leader struct {
		Name, Value string
		Term        uint64
	}
	var got []leader
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var l leader
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("observe printed %q: %v", line, err)
		}
		got = append(got, l)
	}
	want := []leader{{"sched", "host-a", 1}, {"sched", "host-b", 2}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("observe printed %+v; want %+v", got, want)
	}
}

// When the term is lost, elect stops its command with SIGTERM and exits 4;
// when it cannot win within --wait, it exits 3.
func TestElectLostKillsChild(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd, out := startSupervised(t, ctx, "elect", "--backend", u, "--ttl", "1s", "--grace", "5s", "leader", "me")
	if r := dlockCmd(t, nil, "elect", "--backend", u, "--wait", "300ms", "leader", "other", "--", "true"); r.code != 3 {
		t.Fatalf("elect --wait while another leads: exit %d (%s)", r.code, r.stderr)
	}
	if err := c.ForceUnlock(ctx, "leader"); err != nil {
		t.Fatal(err)
	}
	wantLostExit(t, cmd, out, "elect after losing its term")
}

// A term force-released while the command runs, found gone only when dlock
// resigns it (the TTL is long, so no renewal sees it first): elect says so
// on stderr and exits 4, as dlock run does. It exited with the command's
// status (0), so a cron wrapper could not tell the run was unprotected.
func TestElectLostAtResign(t *testing.T) {
	for _, b := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"redis", redisURL},
		{"etcd", func(t *testing.T) string { return "etcd://" + testserver.Etcd(t).Addr() }},
	} {
		t.Run(b.name, func(t *testing.T) {
			u := b.url(t)
			done := filepath.Join(t.TempDir(), "done")
			cmd, out, _ := startRun(t, "elect", "--backend", u, "--ttl", "60s", "gone-lead", "me", "--",
				"sh", "-c", `echo started; while [ ! -e "$0" ]; do sleep 0.05; done`, done)
			if err := drivertest.MustOpen(t, u).ForceUnlock(t.Context(), "gone-lead"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(done, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd, 30*time.Second, out); code != 4 || !strings.Contains(out.String(), `term in election "gone-lead" was lost before sh ended (exit status 0)`) {
				t.Fatalf("exit %d, want 4 and the loss on stderr:\n%s", code, out.String())
			}
		})
	}
}

// An election's name, inspected, force-released or run under, shows its
// leader's value and term: the candidate's owner id is an internal one
// ("election:…") that no operator chose, and the question showed it as if
// it named the holder.
func TestElectionHolderShowsLeader(t *testing.T) {
	u := redisURL(t)
	term, err := drivertest.MustOpen(t, u).Election("sched").Campaign(t.Context(), "host-a")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(context.WithoutCancel(t.Context()))
	want := fmt.Sprintf("election leader host-a, term %d, ", term.Token())
	r := dlockCmd(t, nil, "inspect", "--backend", u, "sched")
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("sched: held by election leader host-a (holds 1, term %d, ", term.Token())) || strings.Contains(r.stdout, "election:") {
		t.Errorf("inspect: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = dlockCmd(t, nil, "run", "--backend", u, "--no-wait", "sched", "--", "true")
	if r.code != 3 || !strings.Contains(r.stderr, "(held by "+want) || strings.Contains(r.stderr, "election:") {
		t.Errorf("run --no-wait: exit %d, stderr %q", r.code, r.stderr)
	}
	cmd := exec.CommandContext(t.Context(), bin, "unlock", "--backend", u, "--force", "sched")
	cmd.Stdin = strings.NewReader("n\n")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), `Force-release "sched" held by `+want) || strings.Contains(string(out), "election:") {
		t.Errorf("unlock --force asked: %q", out)
	}
	if err := term.Err(); err != nil {
		t.Errorf("the term after the refused unlock: %v", err)
	}
}
