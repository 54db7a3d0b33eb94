package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/internal/syncbuf"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	_ "github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

var bin string // the dlock binary under test

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dlock-cli-test-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "dlock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	if b := os.Getenv("DLOCK_TEST_BIN"); b != "" {
		bin = b // to check that a test fails on an older build
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

func dlockCmd(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("dlock %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

func redisURL(t *testing.T) string {
	return "redis://" + testserver.Redis(t).Addr()
}

type demoRow struct {
	Backend    string  `json:"backend"`
	Mode       string  `json:"mode"`
	Requests   int     `json:"requests"`
	Sold       int     `json:"sold"`
	Busy       int     `json:"busy"`
	SoldOut    int     `json:"sold_out"`
	FinalStock int     `json:"final_stock"`
	Oversold   int     `json:"oversold"`
	Lost       int     `json:"lost"`
	Errors     int     `json:"errors"`
	RPS        float64 `json:"rps"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
}

// demoRows parses demo -o json's results, checking that every field is
// there (empty ones too).
func demoRows(t *testing.T, stdout string) []demoRow {
	t.Helper()
	var out struct {
		Results []map[string]any `json:"results"`
		Skipped []map[string]any `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || out.Results == nil || out.Skipped == nil {
		t.Fatalf("demo -o json: %v\n%s", err, stdout)
	}
	var rows []demoRow
	for _, m := range out.Results {
		for _, k := range []string{"backend", "mode", "requests", "sold", "busy", "sold_out", "stale_rejected", "errors", "final_stock", "oversold", "lost", "rps", "p50_ms", "p99_ms"} {
			if _, ok := m[k]; !ok {
				t.Errorf("demo -o json: a row lacks %q: %v", k, m)
			}
		}
		b, _ := json.Marshal(m)
		var row demoRow
		if err := json.Unmarshal(b, &row); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	return rows
}

// The demo with its defaults: no oversell in any protected mode, an
// oversell with only local locks (over a few runs), and nothing left behind.
func TestDemoDefaults(t *testing.T) {
	localOversold := false
	for run := 0; run < 3 && !localOversold; run++ {
		tmp := t.TempDir()
		r := dlockCmd(t, []string{"TMPDIR=" + tmp}, "demo", "-o", "json")
		if r.code != 0 {
			t.Fatalf("demo exit %d: %s", r.code, r.stderr)
		}
		rows := demoRows(t, r.stdout)
		if len(rows) != 6 {
			t.Fatalf("want 6 modes, got %d", len(rows))
		}
		for _, row := range rows {
			if row.Requests != 300 || row.Backend == "" || row.RPS <= 0 || row.P99 < row.P50 {
				t.Errorf("implausible row %+v", row)
			}
			switch row.Mode {
			case "local":
				localOversold = localOversold || row.Oversold > 0
			case "trylock":
				if row.Oversold != 0 || row.Lost != 0 || row.Sold+row.FinalStock != 100 {
					t.Errorf("trylock: %+v", row)
				}
			default:
				if row.Oversold != 0 || row.Lost != 0 || row.Errors != 0 || row.Sold != 100 || row.FinalStock != 0 {
					t.Errorf("%s mode sold wrong: %+v", row.Mode, row)
				}
			}
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("demo left %d entries in TMPDIR", len(left))
		}
		if out, _ := exec.Command("pgrep", "-f", bin+" __demo-instance").Output(); len(out) != 0 {
			t.Errorf("demo left instance processes: %s", out)
		}
	}
	if !localOversold {
		t.Error("local mode never oversold in 3 runs: the demo does not show the race")
	}
}

func TestDemoTable(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "latency.svg")
	r := dlockCmd(t, nil, "demo", "--modes", "local,lock", "--requests", "60", "--stock", "20", "--svg", svg)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	checkLatencySVG(t, svg, []string{"local", "lock"})
	for _, want := range []string{"backend etcd (embedded", "oversold  lost", "local", "lock", "latency (ms)", "≤1s"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stderr, "[#") || strings.Contains(r.stderr, "starting") {
		t.Errorf("progress on a stderr that is not a terminal:\n%s", r.stderr)
	}
	if r := dlockCmd(t, nil, "demo", "--modes", "bogus"); r.code != 2 || !strings.Contains(r.stderr, "multi") {
		t.Errorf("unknown mode: exit %d, %q (want every mode named, multi too)", r.code, r.stderr)
	}
}

// Flags that cannot make an experiment are refused up front, before any
// store is started (an adversary pass: --modes "" ran nothing and passed;
// --segments over --stock ran on past its --timeout for minutes; an --svg
// into no directory failed only after the whole run).
func TestDemoRefusesUpFront(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--modes", ""}, "--modes names no mode"},
		{[]string{"--modes", "segmented", "--segments", "1000000"}, "more than --stock"},
		{[]string{"--instances", "1000"}, "at most 64"},
		{[]string{"--svg", "/nonexistent/dir/x.svg"}, "no directory"},
	} {
		r := dlockCmd(t, nil, append([]string{"demo"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "etcd") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// A mode that --timeout cuts short fails and says so: the requests cut
// off were counted as errors ("errors 30", no word of the time limit), and
// a mode that answered none passed.
func TestDemoTimeoutSaysSo(t *testing.T) {
	r := dlockCmd(t, nil, "demo", "--modes", "lock", "--timeout", "1ns", "-o", "json")
	if r.code != 1 || !strings.Contains(r.stderr, "lock mode on etcd") || !strings.Contains(r.stderr, "timed out (--timeout 1ns) with 0 of 300 requests answered") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	rows := demoRows(t, r.stdout)
	if len(rows) != 1 || rows[0].Errors != 0 || !strings.Contains(r.stdout, `"timed_out": true`) {
		t.Errorf("rows %+v\n%s", rows, r.stdout)
	}
}

// The demo against Redis, with the stock in Redis too.
func TestDemoRedis(t *testing.T) {
	u := redisURL(t)
	r := dlockCmd(t, nil, "demo", "-o", "json", "--backend", u, "--store", u, "--modes", "lock,fenced,cas", "--requests", "100", "--stock", "50")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, row := range demoRows(t, r.stdout) {
		if row.Sold != 50 || row.Oversold != 0 || row.FinalStock != 0 || !strings.HasPrefix(row.Backend, "redis://") {
			t.Errorf("%+v", row)
		}
	}
}

// The demo on PostgreSQL: locks in table mode, stock in the same database.
func TestDemoPostgres(t *testing.T) {
	u := testserver.PostgresURL(testserver.Postgres(t))
	r := dlockCmd(t, nil, "demo", "-o", "json", "--backend", u, "--store", u, "--modes", "lock,fenced,cas", "--requests", "60", "--stock", "30")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, row := range demoRows(t, r.stdout) {
		if row.Sold != 30 || row.Oversold != 0 || row.FinalStock != 0 {
			t.Errorf("%+v", row)
		}
	}
}

func TestRunPassesTokenAndExitStatus(t *testing.T) {
	u := redisURL(t)
	r := dlockCmd(t, []string{"DLOCK_URL=" + u}, "run", "job", "--", "sh", "-c", `echo "$DLOCK_NAME $DLOCK_TOKEN"; exit 7`)
	if r.code != 7 || r.stdout != "job 1\n" {
		t.Fatalf("run: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if info, _ := drivertest.MustOpen(t, u).Inspect(t.Context(), "job"); info.Held {
		t.Fatal("lock still held after run")
	}
}

func TestRunNotAcquired(t *testing.T) {
	u := redisURL(t)
	l, err := drivertest.MustOpen(t, u).Mutex("busy").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	if r := dlockCmd(t, nil, "run", "--backend", u, "--no-wait", "busy", "--", "true"); r.code != 3 {
		t.Fatalf("--no-wait on a held lock: exit %d (%s)", r.code, r.stderr)
	}
	if r := dlockCmd(t, nil, "run", "--backend", u, "--wait", "300ms", "busy", "--", "true"); r.code != 3 {
		t.Fatalf("--wait elapsed: exit %d (%s)", r.code, r.stderr)
	}
}

// When the lock is removed behind it, run stops its command with SIGTERM
// and exits 4.
func TestRunLeaseLostKillsChild(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd, out := startSupervised(t, ctx, "run", "--backend", u, "--ttl", "1s", "--grace", "5s", "cron")
	if err := c.ForceUnlock(ctx, "cron"); err != nil {
		t.Fatal(err)
	}
	wantLostExit(t, cmd, out, "run after losing its lease")
}

// startSupervised starts dlock with args and, after "--", a child that says
// "started", then waits for SIGTERM and says "got-TERM". It returns once
// the child has started; out has what both print.
func startSupervised(t *testing.T, ctx context.Context, args ...string) (cmd *exec.Cmd, out *syncBuffer) {
	t.Helper()
	cmd = exec.CommandContext(ctx, bin, append(args,
		"--", "sh", "-c", `trap 'echo got-TERM; exit 0' TERM; echo started; while :; do sleep 0.05; done`)...)
	out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(out.String(), "started") {
		time.Sleep(20 * time.Millisecond) // polling the child's output: no channel says it
	}
	return cmd, out
}

// wantLostExit wants cmd, started by startSupervised, to exit 4 (what: its
// lock lost) after sending its child SIGTERM.
func wantLostExit(t *testing.T, cmd *exec.Cmd, out *syncBuffer, what string) {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("%s: %v; want exit 4\n%s", what, err, out.String())
	}
	if !strings.Contains(out.String(), "got-TERM") {
		t.Fatalf("child was not sent SIGTERM:\n%s", out.String())
	}
}

func TestInspectAndForceUnlock(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	l, err := c.Mutex("orders", dlock.WithOwner("op-test"), dlock.WithLabel("billing-3")).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := dlockCmd(t, nil, "inspect", "--backend", u, "-o", "json", "orders")
	var info struct {
		Held  bool   `json:"held"`
		Owner string `json:"owner"`
		Label string `json:"label"`
		Token uint64 `json:"token"`
		TTLMs int64  `json:"ttl_ms"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &info) != nil || !info.Held || info.Owner != "op-test" || info.Label != "billing-3" || info.Token != l.Token() || info.TTLMs <= 0 {
		t.Fatalf("inspect: exit %d, %q, %+v", r.code, r.stdout, info)
	}
	if r := dlockCmd(t, nil, "inspect", "--backend", u, "orders"); !strings.Contains(r.stdout, "held by billing-3 (owner op-test)") {
		t.Fatalf("inspect text: %q", r.stdout)
	}
	if r := dlockCmd(t, nil, "unlock", "--backend", u, "orders"); r.code != 2 {
		t.Fatalf("unlock without --force: exit %d", r.code)
	}
	if r := dlockCmd(t, nil, "unlock", "--backend", u, "--force", "--yes", "orders"); r.code != 0 {
		t.Fatalf("unlock --force: exit %d %s", r.code, r.stderr)
	}
	if r := dlockCmd(t, nil, "inspect", "--backend", u, "orders"); !strings.Contains(r.stdout, "free") {
		t.Fatalf("after force unlock: %q", r.stdout)
	}
	select {
	case <-l.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("holder not told its lock was force-released")
	}
}

func TestMigrate(t *testing.T) {
	pg := testserver.PostgresURL(testserver.Postgres(t))
	for range 2 { // safe to run again
		if r := dlockCmd(t, nil, "migrate", "--backend", pg); r.code != 0 || !strings.Contains(r.stdout, "tables ready") {
			t.Fatalf("migrate: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
	}
	if r := dlockCmd(t, nil, "migrate", "--backend", redisURL(t)); r.code != 0 || !strings.Contains(r.stdout, "function library loaded") {
		t.Fatalf("migrate on redis: exit %d %q", r.code, r.stdout)
	}
}

// Bad or unreachable backends: one line, exit 2, no password, no stack trace.
// The URLs with passwords come by DLOCK_URL, which raises no warning.
func TestBadBackends(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"DLOCK_URL=redis://user:s3cret@127.0.0.1:1/0?dial_timeout=200ms"}, []string{"inspect", "x"}, "connect"},
		{nil, []string{"inspect", "--backend", "nosuch://h", "x"}, "forgotten import"},
		{[]string{"DLOCK_URL=redis://user:s3cret@[::1"}, []string{"inspect", "x"}, "invalid backend URL"},
		{[]string{"DLOCK_URL="}, []string{"inspect", "x"}, "no backend"},
		{nil, []string{"run", "--backend", "mem://", "x", "true"}, "usage"},
		// A password in a parameter (Sentinel's), in a file, or in a
		// file that is not there.
		{[]string{"DLOCK_URL=redis+sentinel://127.0.0.1:1/mymaster?sentinel_password=s3cret&dial_timeout=200ms"}, []string{"inspect", "x"}, "open"},
		{[]string{"DLOCK_URL=redis://user@127.0.0.1:1/0?dial_timeout=200ms&password_file=" + pwFile}, []string{"inspect", "x"}, "connect"},
		{[]string{"DLOCK_URL=redis://user@127.0.0.1:1/0?password_file=/nonexistent/pw"}, []string{"inspect", "x"}, "password_file xxxxx: no such file"}, // the path says where a secret is kept: hidden, as key= paths are
		{[]string{"DLOCK_URL=redis://user:s3cret@127.0.0.1:1/0?password_file=" + pwFile}, []string{"inspect", "x"}, "not both"},
		// The same failures in JSON.
		{[]string{"DLOCK_URL=redis://user:s3cret@127.0.0.1:1/0?dial_timeout=200ms"}, []string{"inspect", "-o", "json", "x"}, `"exit":2`},
		{[]string{"DLOCK_URL=postgres://user:s3cret@127.0.0.1:1/db?connect_timeout=1"}, []string{"inspect", "x"}, "connect"},
	} {
		r := dlockCmd(t, tc.env, tc.args...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.Contains(r.stderr, tc.want) ||
			strings.Contains(r.stderr, "s3cret") || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("dlock %v %v: exit %d, stderr %q; want exit 2 and one line with %q", tc.env, tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// A password on the command line works, with a warning that it is visible
// in the process list; one from a file (password_file=, --backend-file) or
// DLOCK_URL raises none. The password never shows in output or errors.
func TestBackendSecrets(t *testing.T) {
	const pw = "s3cret-pw"
	srv := testserver.Redis(t)
	// Set the password once the server runs (testserver's readiness check
	// pings without one).
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	if err := rdb.ConfigSet(t.Context(), "requirepass", pw).Err(); err != nil {
		t.Fatal(err)
	}
	_ = rdb.Close()
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "redis-password")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	urlFile := filepath.Join(dir, "url")
	if err := os.WriteFile(urlFile, []byte("redis://:"+pw+"@"+srv.Addr()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inArgv := "redis://:" + pw + "@" + srv.Addr()
	for _, tc := range []struct {
		env  []string
		args []string
		warn bool
	}{
		{nil, []string{"--backend", inArgv}, true},
		{[]string{"DLOCK_URL=" + inArgv}, nil, false},
		{nil, []string{"--backend", "redis://" + srv.Addr() + "?password_file=" + pwFile}, false},
		{nil, []string{"--backend-file", urlFile}, false},
		{[]string{"DLOCK_URL=redis://" + srv.Addr() + "?password_file=" + pwFile}, nil, false},
	} {
		for _, out := range []string{"text", "json"} {
			args := append([]string{"inspect", "-o", out, "job"}, tc.args...)
			r := dlockCmd(t, tc.env, args...)
			warned := strings.Contains(r.stderr, "warning: the --backend URL holds a password") ||
				strings.Contains(r.stderr, `{"event":"warning","message":"the --backend URL holds a password`)
			if out == "json" { // stderr stays JSON lines: the warning is an event
				for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
					if line != "" && !json.Valid([]byte(line)) {
						t.Errorf("dlock %v %v: stderr line %q is not JSON", tc.env, args, line)
					}
				}
			}
			if r.code != 0 || warned != tc.warn || strings.Contains(r.stdout+r.stderr, pw) {
				t.Errorf("dlock %v %v: exit %d, warned %v (want %v), stdout %q, stderr %q", tc.env, args, r.code, warned, tc.warn, r.stdout, r.stderr)
			}
		}
	}
	// Without the password the server refuses, and the error says so.
	r := dlockCmd(t, nil, "inspect", "--backend", "redis://"+srv.Addr(), "job")
	if r.code != 2 || !strings.Contains(r.stderr, "NOAUTH") {
		t.Errorf("no password: exit %d, %q", r.code, r.stderr)
	}
	// A lock taken with the password from a file works end to end.
	r = dlockCmd(t, []string{"DLOCK_URL=redis://" + srv.Addr() + "?password_file=" + pwFile}, "run", "job", "--", "sh", "-c", "echo $DLOCK_TOKEN")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
		t.Errorf("run with password_file: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := dlockCmd(t, nil, "inspect", "--backend", "x://", "--backend-file", urlFile, "job"); r.code != 2 || !strings.Contains(r.stderr, "not both") {
		t.Errorf("--backend and --backend-file: exit %d, %q", r.code, r.stderr)
	}
}

// syncBuffer is a buffer the child writes while the test reads it.
type syncBuffer = syncbuf.Buffer

// A negative duration flag is a usage error (exit 2), for every command:
// `run --wait -1s` waited for ever and `--grace -1s` was taken.
func TestNegativeDurationsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--backend", "mem://neg", "--wait", "-1s", "x", "--", "true"},
		{"run", "--backend", "mem://neg", "--grace", "-1s", "x", "--", "true"},
		{"run", "--backend", "mem://neg", "--ttl", "-5s", "x", "--", "true"},
		{"elect", "--backend", "mem://neg", "--wait", "-1ms", "x", "--", "true"},
		{"top", "--backend", "mem://neg", "--interval", "-1s", "-n", "1"},
		{"top", "--backend", "mem://neg", "-n", "-1"}, // printed nothing and exited 0
		{"inspect", "--backend", "mem://neg", "--connect-timeout", "-1s", "x"},
	} {
		r := dlockCmd(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "must not be negative") && !strings.Contains(r.stderr, "must be positive") {
			t.Errorf("dlock %v: exit %d %q; want 2 and why", args, r.code, r.stderr)
		}
	}
}
