package main_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Exit statuses and -o json errors an adversary pass found wrong: dlock
// run's own failures before the command ran said 1 (a command's own
// failure), an invalid name said 1 on inspect and unlock but 2 on run, and
// an unknown subcommand's error was text with -o json.
func TestExitStatusesOfBadInput(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	l, err := c.Semaphore("sem", 2).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"run", "--backend", u, "--permits", "3", "--no-wait", "sem", "--", "true"}, 2}, // ErrLimitMismatch
		{[]string{"inspect", "--backend", u, ""}, 2},
		{[]string{"unlock", "--backend", u, "--force", "--yes", ""}, 2},
		{[]string{"unlock", "--backend", u, "--force", "--yes", "--kind", "rw", ""}, 2},
		{[]string{"run", "--backend", u, "", "--", "true"}, 2},
		{[]string{"-o", "json", "unlock", "--backend", u, "--force", "--kind", "sem", "sem"}, 2}, // no question with -o json
	} {
		if r := dlockCmd(t, nil, tc.args...); r.code != tc.code {
			t.Errorf("dlock %q: exit %d, want %d: %s", tc.args, r.code, tc.code, r.stderr)
		}
	}
	for _, args := range [][]string{
		{"-o", "json", "bogus-subcommand"},
		{"bogus-subcommand", "--output=json"},
		{"-ojson", "bogus-subcommand"},
	} {
		r := dlockCmd(t, nil, args...)
		var e struct {
			Error string `json:"error"`
			Exit  int    `json:"exit"`
		}
		if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || e.Exit != 2 || r.code != 2 || r.stdout != "" {
			t.Errorf("dlock %q: exit %d, stderr %q, stdout %q; want one JSON error, exit 2", args, r.code, r.stderr, r.stdout)
		}
	}
}

// Signals a command may be told through dlock run beyond the four it
// forwarded: Go caught SIGUSR1, SIGUSR2 and SIGALRM and dropped them.
func TestRunForwardsUserSignals(t *testing.T) {
	u := redisURL(t)
	for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM} {
		cmd, out, _ := startRun(t, "run", "--backend", u, "usr", "--",
			"sh", "-c", `trap 'echo got-it; exit 7' USR1 USR2 ALRM; echo pid $$; echo started; while :; do sleep 0.05; done`)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd, 20*time.Second, out); code != 7 || !strings.Contains(out.String(), "got-it") {
			t.Errorf("%v: exit %d; the command did not get it:\n%s", sig, code, out.String())
		}
	}
}

// A store that goes silent after Open is an unreachable backend (exit 2),
// not a lock held (3), whether run tries once or waits: a cron wrapper
// must not read "held" (the re-test adversary pass).
func TestRunOnStoreSilentAfterOpen(t *testing.T) {
	srv, mc := testserver.Redis(t), testserver.Memcached(t)
	for _, tc := range []struct {
		scheme, addr, cut string // cut: the first request Open does not make
		mode              []string
	}{
		{"redis", srv.Addr(), "silentlock", []string{"--no-wait"}},
		{"redis", srv.Addr(), "silentlock", []string{"--wait", "500ms"}},
		{"memcached", mc.Addr(), "add ", []string{"--no-wait"}}, // an i/o timeout, not ctx's: it said 3
	} {
		p := testserver.NewProxy(t, tc.addr)
		p.BlackholeAt([]byte(tc.cut), nil) // Open's requests pass; the lock's hangs
		start := time.Now()
		r := dlockCmd(t, nil, append(append([]string{"run", "--backend", tc.scheme + "://" + p.Addr(), "--connect-timeout", "1s"}, tc.mode...),
			"silentlock", "--", "true")...)
		// (The store's own timeout may come first: then its error, still 2.)
		if r.code != 2 || !strings.Contains(r.stderr, "does not answer") && !strings.Contains(r.stderr, "i/o timeout") {
			t.Errorf("%s %v: exit %d after %v: %s; want 2, the store does not answer", tc.scheme, tc.mode, r.code, time.Since(start).Round(time.Millisecond), r.stderr)
		}
	}
}

// dlock run exits soon after it stopped its command on a lost lease, even
// when the store is cut off: the client's Close waited for pgx's closing
// of the cut connections, 15 s (the re-test adversary pass: exit 4 came
// 17.5 s after the cut).
func TestRunExitsSoonAfterLossOnCutStore(t *testing.T) {
	u, p := postgresBehindProxy(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd, out := startSupervised(t, ctx, "run", "--backend", u, "--ttl", "3s", "--grace", "500ms", "--connect-timeout", "2s", "cutrun")
	cut := time.Now()
	p.Blackhole()
	wantLostExit(t, cmd, out, "run on a cut store")
	// The loss comes within the TTL; then the grace, the bounded release
	// and the bounded Close (2 s each). 17.5 s before; room for a loaded
	// machine between.
	if took := time.Since(cut); took > 12*time.Second {
		t.Errorf("exit 4 came %v after the cut", took.Round(time.Millisecond))
	}
}

// A store that goes silent while the command runs holds dlock run no
// longer than --connect-timeout after the command ends: the final release
// waited without end, deaf to SIGTERM (an adversary pass: pg, etcd, NATS).
func TestRunFinalReleaseOnSilentStoreIsBounded(t *testing.T) {
	u, p := postgresBehindProxy(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--backend", u, "--ttl", "60s", "--connect-timeout", "2s", "silentend",
		"--", "sh", "-c", "echo started; sleep 1")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(out.String(), "started") {
		time.Sleep(20 * time.Millisecond) // polling the child's output: no channel says it
	}
	p.Blackhole()
	// The command's 1 s, the bounded release and Close (2 s each), and
	// room for a loaded machine.
	if code := waitExit(t, cmd, 20*time.Second, out); code != 0 || !strings.Contains(out.String(), "release not confirmed") {
		t.Errorf("exit %d; want the command's 0 and a word that the release was not confirmed:\n%s", code, out.String())
	}
}

// postgresBehindProxy starts PostgreSQL and returns its URL through a proxy
// the test can cut, and the proxy.
func postgresBehindProxy(t *testing.T) (string, *testserver.Proxy) {
	pg := testserver.Postgres(t)
	p := testserver.NewProxy(t, pg.Addr())
	return strings.Replace(testserver.PostgresURL(pg), pg.Addr(), p.Addr(), 1), p
}

// The operator's commands on a store that goes silent after Open end with
// exit 2, the store does not answer, within --request-timeout: dlock
// inspect waited 21 s for go-redis's own timeouts and retries (an
// adversary pass), and with etcd until it was killed (its client has no
// timeout of its own; 2 minutes in this test before the flag).
func TestOperatorCommandsOnStoreSilentAfterOpen(t *testing.T) {
	rd, et := testserver.Redis(t), testserver.Etcd(t)
	for _, tc := range []struct{ scheme, addr string }{{"redis", rd.Addr()}, {"etcd", et.Addr()}} {
		for _, op := range [][]string{
			{"inspect", "silentop"},
			{"ls", "silentop"},
			{"unlock", "--force", "--yes", "silentop"},
			{"unlock", "--force", "--yes", "--kind", "rw", "silentop"},
		} {
			cut := "silentop" // Open's requests pass; the operation's hang
			if tc.scheme == "redis" && op[0] == "ls" {
				cut = "zrange" // the index, which holds every name
			}
			p := testserver.NewProxy(t, tc.addr)
			p.BlackholeAt([]byte(cut), nil)
			start := time.Now()
			r := dlockCmd(t, nil, append([]string{"--backend", tc.scheme + "://" + p.Addr(), "--connect-timeout", "1s", "--request-timeout", "1s"}, op...)...)
			took := time.Since(start)
			if r.code != 2 || !strings.Contains(r.stderr, "does not answer") {
				t.Errorf("%s %v: exit %d after %v: %s; want 2, the store does not answer", tc.scheme, op, r.code, took.Round(time.Millisecond), r.stderr)
			}
			// 1 s of request, 1 s of Close, and room for a loaded machine.
			if took > 8*time.Second {
				t.Errorf("%s %v: exit after %v", tc.scheme, op, took.Round(time.Millisecond))
			}
		}
	}
}

// A PostgreSQL store cut off while Open sets up its tables fails within
// about --connect-timeout: it took 16 s (a re-test adversary pass), the
// rollback of the cut set-up having no bound.
func TestOpenCutDuringSetUp(t *testing.T) {
	for _, cut := range []string{"pg_advisory_xact_lock", "create", "commit"} { // a new server each: the tables are made
		u, p := postgresBehindProxy(t)
		p.BlackholeAt([]byte(cut), nil)
		start := time.Now()
		r := dlockCmd(t, nil, "--backend", u, "--connect-timeout", "1s", "inspect", "x")
		took := time.Since(start)
		if r.code != 2 {
			t.Errorf("cut at %s: exit %d: %s; want 2", cut, r.code, r.stderr)
		}
		if took > 6*time.Second { // 1 s, the bounded clean-up, and room for a loaded machine
			t.Errorf("cut at %s: exit after %v with --connect-timeout 1s: %s", cut, took.Round(time.Millisecond), r.stderr)
		}
	}
}
