package main_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	_ "github.com/go-sql-driver/mysql"
)

// An etcd or ZooKeeper that does not answer fails within --connect-timeout,
// saying what it waited for (it used to take 10 s and end in "context
// deadline exceeded"); an etcd that refuses the connection says so at once.
func TestConnectTimeout(t *testing.T) {
	silent := testserver.SilentAddr(t)
	for _, u := range []string{"etcd://" + silent, "zk://" + silent} {
		t0 := time.Now()
		r := dlockCmd(t, nil, "inspect", "--backend", u, "--connect-timeout", "1s", "x")
		took := time.Since(t0)
		scheme := strings.Split(u, ":")[0]
		if r.code != 2 || !strings.Contains(r.stderr, "no answer from "+scheme+" at "+silent+" within 1s (--connect-timeout)") ||
			strings.Contains(r.stderr, "context deadline exceeded") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q", u, r.code, r.stderr)
		}
		if took > 8*time.Second { // generous: the flag says 1s, the old fixed wait was 10s
			t.Errorf("%s: --connect-timeout 1s took %v", u, took)
		}
	}
	r := dlockCmd(t, nil, "inspect", "--backend", "etcd://127.0.0.1:1", "--connect-timeout", "5s", "x")
	if r.code != 2 || !strings.Contains(r.stderr, "connect: connection refused") || strings.Contains(r.stderr, "no answer") {
		t.Errorf("refused etcd: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A refused Sentinel or cluster seed is one line of dlock's on stderr:
// go-redis's own lines about the dials of its Sentinel and cluster clients,
// which no hook of dlock's sees, went to stderr too (eight of them).
func TestRefusedRedisSeedOneLine(t *testing.T) {
	for _, u := range []string{"redis+sentinel://127.0.0.1:1/m", "redis+cluster://127.0.0.1:1"} {
		r := dlockCmd(t, nil, "inspect", "--backend", u, "--connect-timeout", "2s", "x")
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || strings.Contains(r.stderr, "redis: ") {
			t.Errorf("%s: exit %d, stderr %q", u, r.code, r.stderr)
		}
	}
}

// "Not acquired" names the holder.
func TestNotAcquiredNamesHolder(t *testing.T) {
	u := redisURL(t)
	l, err := drivertest.MustOpen(t, u).Mutex("busy", dlock.WithOwner("op-7"), dlock.WithLabel("billing-3")).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	r := dlockCmd(t, nil, "run", "--backend", u, "--no-wait", "busy", "--", "true")
	if r.code != 3 || !strings.Contains(r.stderr, `lock "busy" not acquired (held by billing-3 (owner op-7), token 1,`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// "Not acquired" names the holders of a read-write lock or semaphore too,
// each with its kind (it named nobody: only a mutex was looked at).
func TestNotAcquiredNamesKindHolders(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	ctx := t.Context()
	for i := range 4 {
		l, err := c.RWMutex("rw-busy", dlock.WithLabel(fmt.Sprintf("reader-%d", i))).RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
	}
	l, err := c.Semaphore("sem-busy", 1, dlock.WithLabel("batch-9")).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--write", "rw-busy"}, []string{`lock "rw-busy" not acquired (held by shared reader-`, "; and 1 more): tried once"}},
		{[]string{"--permits", "1", "sem-busy"}, []string{`lock "sem-busy" not acquired (held by permit batch-9 (owner `, ", token 1, "}},
	} {
		r := dlockCmd(t, nil, append(append([]string{"run", "--backend", u, "--no-wait"}, tc.args...), "--", "true")...)
		for _, w := range tc.want {
			if r.code != 3 || !strings.Contains(r.stderr, w) {
				t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, r.code, r.stderr, w)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	r := dlockCmd(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "dlock ") || !strings.Contains(r.stdout, "go1.") {
		t.Fatalf("version: exit %d %q", r.code, r.stdout)
	}
	r = dlockCmd(t, nil, "version", "-o", "json")
	var v map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v["version"] == "" {
		t.Fatalf("version -o json: exit %d %q", r.code, r.stdout)
	}
	for _, k := range []string{"version", "revision", "modified", "go"} {
		if _, ok := v[k]; !ok {
			t.Errorf("version -o json lacks %q: %s", k, r.stdout)
		}
	}
}

// jsonKeys parses one JSON object and checks it has every key, empty ones
// included.
func jsonKeys(t *testing.T, what, s string, keys ...string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, s)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q: %s", what, k, s)
		}
	}
	return m
}

// -o json on every command, errors included, with empty fields kept.
func TestJSONOutput(t *testing.T) {
	u := redisURL(t)
	env := []string{"DLOCK_URL=" + u}
	infoKeys := []string{"name", "held", "owner", "label", "holds", "token", "ttl_ms", "waiters", "notes"}
	r := dlockCmd(t, env, "inspect", "-o", "json", "free-one")
	if m := jsonKeys(t, "inspect of a free lock", r.stdout, infoKeys...); m["held"] != false {
		t.Errorf("inspect: %s", r.stdout)
	}
	r = dlockCmd(t, env, "unlock", "--force", "-o", "json", "free-one")
	if m := jsonKeys(t, "unlock", r.stdout, "name", "released", "holder"); m["released"] != false {
		t.Errorf("unlock of a free lock: %s", r.stdout)
	}
	if _, err := drivertest.MustOpen(t, u).Mutex("held-one").Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	r = dlockCmd(t, env, "unlock", "--force", "--yes", "-o", "json", "held-one")
	if m := jsonKeys(t, "unlock", r.stdout, "name", "released", "holder"); m["released"] != true {
		t.Errorf("unlock of a held lock: %s", r.stdout)
	}
	r = dlockCmd(t, env, "migrate", "-o", "json")
	if m := jsonKeys(t, "migrate", r.stdout, "backend", "tables", "functions"); m["backend"] != "redis" || m["tables"] != false || m["functions"] != true {
		t.Errorf("migrate: %s", r.stdout)
	}
	// Errors: one JSON object on stderr with the message and exit status.
	r = dlockCmd(t, env, "run", "-o", "json", "--backend", "redis://127.0.0.1:1/0?dial_timeout=200ms", "x", "--", "true")
	if m := jsonKeys(t, "run error", r.stderr, "error", "exit"); r.code != 2 || m["exit"] != float64(2) {
		t.Errorf("run error: exit %d %s", r.code, r.stderr)
	}
	// The command's own status is no error of dlock's: stderr stays the
	// command's (it got {"error":"","exit":7} added).
	r = dlockCmd(t, env, "run", "-o", "json", "own-status", "--", "sh", "-c", "echo own >&2; exit 7")
	if r.code != 7 || r.stderr != "own\n" {
		t.Errorf("run -o json of a command exiting 7: exit %d, stderr %q", r.code, r.stderr)
	}
	r = dlockCmd(t, env, "inspect", "-o", "yaml", "x")
	if r.code != 2 || !strings.Contains(r.stderr, "-o must be text or json") {
		t.Errorf("-o yaml: exit %d %q", r.code, r.stderr)
	}
}

// demo refuses mem:// with the reason; --backend all runs what it is given
// and can reach, and says what it skipped and why.
func TestDemoBackends(t *testing.T) {
	r := dlockCmd(t, nil, "demo", "--backend", "mem://")
	if r.code != 2 || !strings.Contains(r.stderr, "each app instance is a process of its own") {
		t.Fatalf("demo mem://: exit %d %q", r.code, r.stderr)
	}
	u := redisURL(t)
	r = dlockCmd(t, []string{"DLOCK_DEMO_BACKENDS=" + u + " mem://", "DLOCK_URL="}, "demo", "--backend", "all",
		"--also", "etcd://127.0.0.1:1", "--connect-timeout", "1s", "-o", "json", "--modes", "lock", "--requests", "20", "--stock", "10")
	if r.code != 0 {
		t.Fatalf("demo all: exit %d %s", r.code, r.stderr)
	}
	var out struct {
		Results []demoRow `json:"results"`
		Skipped []struct{ Backend, Reason string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, row := range out.Results {
		ran = append(ran, row.Backend)
		if row.Sold != 10 || row.Oversold != 0 {
			t.Errorf("%+v", row)
		}
	}
	if len(ran) != 2 || !strings.HasPrefix(ran[0], "etcd (embedded") || ran[1] != u {
		t.Errorf("ran on %q, want the embedded etcd and %s", ran, u)
	}
	want := map[string]string{"mem://": "process of its own", "etcd://127.0.0.1:1": "dial tcp 127.0.0.1:1: connect: connection refused"}
	for _, s := range out.Skipped {
		if w, ok := want[s.Backend]; ok && strings.Contains(s.Reason, w) {
			delete(want, s.Backend)
		}
	}
	if len(want) != 0 || len(out.Skipped) != 2 {
		t.Errorf("skipped %+v; missing %v", out.Skipped, want)
	}
	for b := range map[string]bool{"mem://": true, "etcd://127.0.0.1:1": true} {
		if !strings.Contains(r.stderr, "skipping "+b) {
			t.Errorf("stderr does not say it skipped %s: %q", b, r.stderr)
		}
	}
}

// Progress bars are drawn on a terminal (and only there: TestDemoTable).
func TestDemoProgressOnTerminal(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("no script(1) to give dlock a terminal")
	}
	cmd := exec.CommandContext(t.Context(), "script", "-qefc",
		bin+" demo --modes lock --requests 20 --stock 10", os.DevNull)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "[##############################]") {
		t.Fatalf("demo on a terminal: %v, no progress bar:\n%s", err, out)
	}
}

// TestNotAcquiredSaysItOnce: the error names the holder (or the leader)
// and why the wait ended, once, without the library's restatement.
func TestNotAcquiredSaysItOnce(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	if _, err := c.Mutex("once", dlock.WithLabel("billing-3")).Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Election("once-el").Campaign(t.Context(), "node-a"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--no-wait", "once", "--", "true"}, `lock "once" not acquired (held by billing-3 (owner `},
		{[]string{"run", "--wait", "300ms", "once", "--", "true"}, `: --wait 300ms elapsed`},
		{[]string{"elect", "--wait", "300ms", "once-el", "node-b", "--", "true"}, `election "once-el" not won (led by node-a, term 1): --wait 300ms elapsed`},
	} {
		r := dlockCmd(t, nil, append([]string{tc.args[0], "--backend", u}, tc.args[1:]...)...)
		if r.code != 3 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "dlock:") != 1 || strings.Count(r.stderr, "not acquired") > 1 {
			t.Errorf("%q: exit %d, stderr %q; want 3 and %q, said once", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// TestConnectTimeoutMemcached: a memcached that accepts and never answers
// gets the same message as every store, not a raw "i/o timeout".
func TestConnectTimeoutMemcached(t *testing.T) {
	addr := testserver.Serve(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }) // accepts and stays silent
	r := dlockCmd(t, nil, "ls", "--backend", "memcached://"+addr, "--connect-timeout", "2s")
	if r.code != 2 || !strings.Contains(r.stderr, "no answer from memcached at "+addr+" within 2s (--connect-timeout)") || strings.Contains(r.stderr, "i/o timeout") {
		t.Errorf("exit %d, stderr %q; want 2 and the uniform message, after the whole --connect-timeout", r.code, r.stderr)
	}
}

// unlock --force asks about the holder it shows, and the answer may come
// much later: it releases only that holder. One that changed meanwhile is
// left alone (exit 1), and a lock freed meanwhile is reported not held.
// It had released whoever held the lock when the answer came.
func TestUnlockReleasesOnlyTheHolderShown(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	ask := func(t *testing.T, name string) (answer func() result) { return askUnlock(t, u, name) }

	first, err := c.Mutex("shown").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	answer := ask(t, "shown")
	if err := first.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	second, err := drivertest.MustOpen(t, u).Mutex("shown").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := answer()
	if r.code != 1 || !strings.Contains(r.stderr, "the holder changed while you answered") {
		t.Errorf("holder changed while asking: exit %d, %q", r.code, r.stderr)
	}
	if err := second.Err(); err != nil {
		t.Errorf("the new holder's lease: %v", err)
	}
	if i, err := c.Inspect(t.Context(), "shown"); err != nil || !i.Held || i.Token != second.Token() {
		t.Errorf("after the refused unlock: %+v, %v; want held with token %d", i, err, second.Token())
	}

	held, err := c.Mutex("freed").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	answer = ask(t, "freed")
	if err := held.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := answer(); r.code != 0 || !strings.Contains(r.stdout, "not held (released while you answered)") {
		t.Errorf("freed while asking: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

// askUnlock starts dlock unlock --force of name on u, with flags, and waits
// for its question; answer says yes and returns how it ended.
func askUnlock(t *testing.T, u, name string, flags ...string) (answer func() result) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, append(append([]string{"unlock", "--backend", u, "--force"}, flags...), name)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	errb := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(errb.String(), "[y/N]"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no question: %s", errb.String())
		}
	}
	return func() result {
		_, _ = in.Write([]byte("y\n"))
		_ = in.Close()
		err := cmd.Wait()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return result{out.String(), errb.String(), code}
	}
}

// On MySQL's session mode the holder is a connection (GET_LOCK), which
// the owner and token, read from dlock's token table, do not name: a plain
// GET_LOCK session that took the lock while the operator answered was
// killed as if it were the dlock holder shown. The note naming the
// connection is compared too.
func TestUnlockSessionModeHolderChanged(t *testing.T) {
	srv := testserver.MariaDB(t)
	u := testserver.MariaDBURL(t, srv, "dlock") + "?mode=session"
	held, err := drivertest.MustOpen(t, u).Mutex("sess").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	answer := askUnlock(t, u, "sess")
	if err := held.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/dlock")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var got int
	if err := conn.QueryRowContext(t.Context(), "SELECT GET_LOCK('sess', 5)").Scan(&got); err != nil || got != 1 {
		t.Fatalf("plain GET_LOCK: %d, %v", got, err)
	}
	if r := answer(); r.code != 1 || !strings.Contains(r.stderr, "the holder changed while you answered") {
		t.Errorf("a plain session took the lock while asking: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if err := conn.PingContext(t.Context()); err != nil {
		t.Errorf("the plain session's connection after the refused unlock: %v", err)
	}
}
