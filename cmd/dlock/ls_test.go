package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	_ "github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/testserver"
	_ "github.com/dlock/dlock/mysqllock"
	_ "github.com/dlock/dlock/pglock"
	_ "github.com/dlock/dlock/zklock"
)

func TestLs(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	for _, n := range []string{"jobs/a", "jobs/b", "other"} {
		if _, err := c.Mutex(n, dlock.WithLabel("w-"+n)).Lock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	r := dlockCmd(t, nil, "ls", "--backend", u, "-o", "json", "jobs/")
	var got []struct {
		Name    string `json:"name"`
		Label   string `json:"label"`
		Kind    string `json:"kind"`
		Token   uint64 `json:"token"`
		TTLMs   int64  `json:"ttl_ms"`
		Waiters int    `json:"waiters"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
		t.Fatalf("ls -o json: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if len(got) != 2 || got[0].Name != "jobs/a" || got[1].Name != "jobs/b" || got[0].Label != "w-jobs/a" ||
		got[0].Kind != "exclusive" || got[0].Token == 0 || got[0].TTLMs <= 0 {
		t.Fatalf("ls jobs/: %+v", got)
	}
	r = dlockCmd(t, nil, "ls", "--backend", u)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "NAME HOLDER KIND TOKEN LEFT WAITERS" {
		t.Fatalf("ls: exit %d\n%s", r.code, r.stdout)
	}
	if f := strings.Fields(lines[3]); f[0] != "other" || f[1] != "w-other" || f[2] != "exclusive" {
		t.Fatalf("ls row %q", lines[3])
	}
	mc := "memcached://" + testserver.Memcached(t).Addr()
	if r := dlockCmd(t, nil, "ls", "--backend", mc); r.code != 1 || !strings.Contains(r.stderr, "unsupported by this backend") ||
		!strings.Contains(r.stderr, "memcached cannot enumerate its keys") {
		t.Fatalf("ls on memcached: exit %d, %q; want 1 and the reason", r.code, r.stderr)
	}
}

// tmux drives a real terminal on a private tmux server.
type tmux struct {
	t    *testing.T
	sock string
}

func newTmux(t *testing.T) *tmux {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed (scripts/install-deps.sh installs it)")
	}
	tm := &tmux{t: t, sock: fmt.Sprintf("dlock-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", tm.sock, "kill-server").Run() })
	return tm
}

func (tm *tmux) run(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-L", tm.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	return string(out), err
}

// screen returns the pane's visible text.
func (tm *tmux) screen() string {
	out, err := tm.run("capture-pane", "-p", "-t", "top")
	if err != nil {
		tm.t.Fatalf("capture-pane: %v %s", err, out)
	}
	return out
}

// topRows parses the table of a top screen into fields by column name.
func topRows(screen string) []map[string]string {
	var head []string
	var rows []map[string]string
	for _, line := range strings.Split(screen, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "NAME":
			head, rows = f, nil
		case head != nil && len(f) == len(head):
			r := map[string]string{}
			for i, h := range head {
				r[h] = f[i]
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// TestTopInTerminal runs dlock top in a tmux terminal against each store
// that lists, while one lock has two waiters and another changes hands all
// the time, and reads the screen: the contended lock first with its waiters
// (where the store queues them), the busy one with acquisitions per second;
// Ctrl-C ends it.
func TestTopInTerminal(t *testing.T) {
	for _, b := range []struct {
		name  string
		url   func(t *testing.T) string
		queue bool // waiters queue in the store, so top sees them
	}{
		{"redis", redisURL, true},
		{"etcd", func(t *testing.T) string { return "etcd://" + testserver.Etcd(t).Addr() }, true},
		{"zk", func(t *testing.T) string { return "zk://" + testserver.ZooKeeper(t).Addr() }, true},
		{"postgres", func(t *testing.T) string { return testserver.PostgresURL(testserver.Postgres(t)) }, false},
		{"postgres-session", func(t *testing.T) string {
			return testserver.PostgresURL(testserver.Postgres(t)) + "&mode=session"
		}, true},
		{"mysql", func(t *testing.T) string {
			srv := testserver.MariaDB(t)
			return testserver.MariaDBURL(t, srv, "dlock")
		}, false},
	} {
		t.Run(b.name, func(t *testing.T) { testTop(t, b.url(t), b.queue) })
	}
}

func testTop(t *testing.T, u string, queue bool) {
	holder := drivertest.MustOpen(t, u)
	if _, err := holder.Mutex("jobs/hot", dlock.WithLabel("worker-hot")).Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Mutex("jobs/idle", dlock.WithLabel("worker-idle")).Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before the Wait
	for range 2 {  // two waiters, each a process of its own
		w := drivertest.MustOpen(t, u)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = w.Mutex("jobs/hot").Lock(ctx)
		}()
	}
	busy := drivertest.MustOpen(t, u)
	wg.Add(1)
	go func() { // jobs/busy changes hands about every 100ms
		defer wg.Done()
		m := busy.Mutex("jobs/busy", dlock.WithLabel("worker-busy"))
		for ctx.Err() == nil {
			l, err := m.Lock(ctx)
			if err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
			_ = l.Unlock(ctx)
		}
	}()

	tm := newTmux(t)
	cmd := fmt.Sprintf("env DLOCK_URL='%s' %s top --interval 300ms jobs/", u, bin)
	if out, err := tm.run("new-session", "-d", "-s", "top", "-x", "160", "-y", "30", cmd); err != nil {
		t.Fatalf("tmux new-session: %v %s", err, out)
	}
	waiting, column := "0", "—" // no record of waiters: "—" and a line saying why
	if queue {
		waiting, column = "2", "2"
	}
	var screen string
	var rows []map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		screen = tm.screen()
		rows = topRows(screen)
		hot := row(rows, "jobs/hot")
		if len(rows) == 3 && hot != nil && hot["WAITERS"] == column && rate(rows, "jobs/busy") > 0 && (!queue || hot["WAIT"] != "-") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("top never showed the locks as they are; last screen:\n%s", screen)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if want := fmt.Sprintf(`prefix "jobs/" - 3 held, %s waiting`, waiting); !strings.Contains(screen, want) {
		t.Errorf("header: want %q in\n%s", want, screen)
	}
	if !queue && !strings.Contains(screen, "WAITERS —: waiters not counted: table-mode waiters poll") {
		t.Errorf("no line says why WAITERS is —:\n%s", screen)
	}
	if strings.Count(screen, "NAME") != 1 {
		t.Errorf("the terminal is not redrawn in place:\n%s", screen)
	}
	order := []string{"jobs/busy", "jobs/hot", "jobs/idle"} // no waiters seen: acquisitions first, then by name
	if queue {
		order = []string{"jobs/hot", "jobs/busy", "jobs/idle"} // waiters first
	}
	for i, name := range order {
		if rows[i]["NAME"] != name {
			t.Errorf("row %d is %s, want order %v\n%s", i, rows[i]["NAME"], order, screen)
		}
	}
	hot := row(rows, "jobs/hot")
	if holder := hot["HOLDER"]; (holder != "worker-hot" && !strings.Contains(u, "mode=session")) || hot["KIND"] != "exclusive" || queue != strings.HasPrefix(hot["WAIT"], ">") {
		t.Errorf("jobs/hot row %v, want held by worker-hot, waiters unserved (>...) where queued\n%s", hot, screen)
	}
	if r := rate(rows, "jobs/busy"); r > 20 {
		t.Errorf("jobs/busy at %v acquisitions/s: it changes hands at most 10 times a second", r)
	}
	if _, err := tm.run("send-keys", "-t", "top", "C-c"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := tm.run("has-session", "-t", "top"); err != nil {
			break // top exited and its session ended
		}
		if time.Now().After(deadline) {
			t.Fatalf("top still running 10s after Ctrl-C:\n%s", tm.screen())
		}
	}
}

func row(rows []map[string]string, name string) map[string]string {
	for _, r := range rows {
		if r["NAME"] == name {
			return r
		}
	}
	return nil
}

func rate(rows []map[string]string, name string) float64 {
	for _, r := range rows {
		if r["NAME"] == name {
			v, _ := strconv.ParseFloat(r["ACQ/S"], 64)
			return v
		}
	}
	return -1
}

// TestLsKinds holds every kind of lock on each store that lists (a mutex,
// an election's term, two readers of a read-write lock, two of three
// permits of a semaphore, a writer) and reads them back through the built
// binary: ls -o json, ls and top each name the kind and its holds.
func TestLsKinds(t *testing.T) {
	for _, b := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"redis", redisURL},
		{"etcd", func(t *testing.T) string { return "etcd://" + testserver.Etcd(t).Addr() }},
		{"zk", func(t *testing.T) string { return "zk://" + testserver.ZooKeeper(t).Addr() }},
		{"postgres", func(t *testing.T) string { return testserver.PostgresURL(testserver.Postgres(t)) }},
		{"mysql", func(t *testing.T) string { return testserver.MariaDBURL(t, testserver.MariaDB(t), "dlock") }},
	} {
		t.Run(b.name, func(t *testing.T) { testLsKinds(t, b.url(t)) })
	}
}

func testLsKinds(t *testing.T, u string) {
	c := drivertest.MustOpen(t, u)
	ctx := t.Context()
	term, err := c.Election("k/el").Campaign(ctx, "leader-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex("k/mx", dlock.WithLabel("worker-mx")).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for n := range 2 {
		who := fmt.Sprintf("reader-%d", n)
		if _, err := c.RWMutex("k/rw", dlock.WithOwner(who), dlock.WithLabel(who)).RLock(ctx); err != nil {
			t.Fatal(err)
		}
		who = fmt.Sprintf("permit-%d", n)
		if _, err := c.Semaphore("k/sem", 3, dlock.WithOwner(who), dlock.WithLabel(who)).Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.RWMutex("k/wr", dlock.WithLabel("writer")).Lock(ctx); err != nil {
		t.Fatal(err)
	}

	r := dlockCmd(t, nil, "ls", "--backend", u, "-o", "json", "k/")
	type holder struct {
		Label string `json:"label"`
	}
	var got []struct {
		Name     string `json:"name"`
		Label    string `json:"label"`
		Kind     string `json:"kind"`
		Token    uint64 `json:"token"`
		Election *struct {
			Leader string `json:"leader"`
			Term   uint64 `json:"term"`
		} `json:"election"`
		RWMutex *struct {
			Writer  *holder  `json:"writer"`
			Readers []holder `json:"readers"`
		} `json:"rwmutex"`
		Semaphore *struct {
			Permits int      `json:"permits"`
			Holders []holder `json:"holders"`
		} `json:"semaphore"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
		t.Fatalf("ls -o json: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	kinds := []string{}
	for _, g := range got {
		kinds = append(kinds, g.Name+" "+g.Kind)
	}
	want := []string{"k/el election", "k/mx exclusive", "k/rw rw-readers:2", "k/sem semaphore:2/3", "k/wr rw-writer"}
	if strings.Join(kinds, ", ") != strings.Join(want, ", ") {
		t.Fatalf("ls -o json k/ lists %q, want %q\n%s", kinds, want, r.stdout)
	}
	switch el, rw, sem, wr := got[0], got[2], got[3], got[4]; {
	case el.Election == nil || el.Election.Leader != "leader-1" || el.Election.Term != term.Token():
		t.Errorf("election: %+v, want leader-1 in term %d", el.Election, term.Token())
	case rw.RWMutex == nil || len(rw.RWMutex.Readers) != 2 || rw.RWMutex.Writer != nil:
		t.Errorf("rwmutex: %+v, want two readers", rw.RWMutex)
	case sem.Semaphore == nil || sem.Semaphore.Permits != 3 || len(sem.Semaphore.Holders) != 2:
		t.Errorf("semaphore: %+v, want 2 of 3 permits held", sem.Semaphore)
	case wr.RWMutex == nil || wr.RWMutex.Writer == nil || wr.RWMutex.Writer.Label != "writer":
		t.Errorf("writer: %+v", wr.RWMutex)
	}
	for _, args := range [][]string{{"ls", "k/"}, {"top", "-n", "1", "k/"}} {
		r := dlockCmd(t, nil, append(args, "--backend", u)...)
		if r.code != 0 || !strings.Contains(r.stdout, "5 held") && args[0] == "top" {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		for _, w := range want {
			name, kind, _ := strings.Cut(w, " ")
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s.*\s` + regexp.QuoteMeta(kind) + `\s`).MatchString(r.stdout) {
				t.Errorf("%v: no row of %s as %s:\n%s", args, name, kind, r.stdout)
			}
		}
	}
}

// TestTopJSONAndUnsupported: top -o json prints one JSON object per
// sample; top on a store that cannot list exits 1 before drawing anything.
func TestTopJSONAndUnsupported(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	if _, err := c.Semaphore("tj/sem", 2, dlock.WithLabel("w")).Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := dlockCmd(t, nil, "top", "--backend", u, "-o", "json", "-n", "2", "--interval", "100ms", "tj/")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("top -o json -n 2: exit %d, want 2 lines:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, l := range lines {
		var s struct {
			Backend string `json:"backend"`
			Held    int    `json:"held"`
			Locks   []struct {
				Name    string   `json:"name"`
				Kind    string   `json:"kind"`
				AcqPerS *float64 `json:"acq_per_s"`
			} `json:"locks"`
		}
		if err := json.Unmarshal([]byte(l), &s); err != nil || s.Backend != "redis" || s.Held != 1 || len(s.Locks) != 1 ||
			s.Locks[0].Name != "tj/sem" || s.Locks[0].Kind != "semaphore:1/2" || s.Locks[0].AcqPerS == nil {
			t.Errorf("sample %s: %+v, %v", l, s, err)
		}
	}
	mc := "memcached://" + testserver.Memcached(t).Addr()
	r = dlockCmd(t, nil, "top", "--backend", mc, "-n", "1")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "cannot enumerate") {
		t.Fatalf("top on memcached: exit %d, stdout %q, stderr %q; want 1, nothing drawn, the reason", r.code, r.stdout, r.stderr)
	}
}

// TestTerminalEscapes: a name and a label holding ESC, BEL, CR, newline
// and an OSC 52 sequence reach ls, top, inspect and the unlock prompt
// escaped, never raw; ls -o json keeps them exact.
func TestTerminalEscapes(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	name := "esc/a\nFAKE-ROW\r\x1b[2J"
	label := "w\x1b]52;c;ZXZpbA==\x07\u009b"
	if _, err := c.Mutex(name, dlock.WithLabel(label)).Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ls", "esc/"}, {"top", "-n", "1", "esc/"}, {"inspect", name}, {"unlock", "--force", name}} {
		r := dlockCmd(t, nil, append(args, "--backend", u)...)
		out := r.stdout + r.stderr
		if strings.ContainsAny(out, "\x1b\x07\r") || strings.Contains(out, "\u009b") || regexp.MustCompile(`(?m)^FAKE-ROW`).MatchString(out) {
			t.Errorf("%s: raw control characters reach the terminal: %q", args[0], out)
		}
		if !strings.Contains(out, `esc/a\nFAKE-ROW\r\x1b[2J`) {
			t.Errorf("%s: the name is not shown escaped: %q", args[0], out)
		}
	}
	r := dlockCmd(t, nil, "ls", "--backend", u, "-o", "json", "esc/")
	var got []struct {
		Name  string `json:"name"`
		Label string `json:"label"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 1 || got[0].Name != name || got[0].Label != label {
		t.Errorf("ls -o json: %+v, %v; want the exact name and label", got, err)
	}
}

// TestTopWidth runs top in tmux at 60 and 200 columns: at 60 the rows are
// cut at the terminal's edge (no row wraps, the title stays on the first
// line); at 200 they are shown whole.
func TestTopWidth(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	label := "a-rather-long-holder-label-" + strings.Repeat("x", 40)
	for _, n := range []string{"w/first-lock-with-a-long-name", "w/second-lock-with-a-long-name"} {
		if _, err := c.Mutex(n, dlock.WithLabel(label)).Lock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for _, width := range []int{60, 200} {
		t.Run(strconv.Itoa(width), func(t *testing.T) {
			tm := newTmux(t)
			cmd := fmt.Sprintf("env DLOCK_URL='%s' %s top --interval 200ms w/", u, bin)
			if out, err := tm.run("new-session", "-d", "-s", "top", "-x", strconv.Itoa(width), "-y", "20", cmd); err != nil {
				t.Fatalf("tmux new-session: %v %s", err, out)
			}
			var screen string
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				screen = tm.screen()
				if strings.Count(screen, "w/") >= 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("top never showed the locks:\n%s", screen)
				}
			}
			lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
			if !strings.HasPrefix(lines[0], "dlock top - redis") {
				t.Errorf("the title is not on the first line:\n%s", screen)
			}
			for _, l := range lines[1:] {
				if l != "" && !strings.HasPrefix(l, "NAME") && !strings.HasPrefix(l, "w/") {
					t.Errorf("a row wrapped (line %q):\n%s", l, screen)
				}
				if utf8.RuneCountInString(l) > width {
					t.Errorf("line wider than %d: %q", width, l)
				}
			}
			if whole := strings.Contains(screen, label); whole != (width == 200) {
				t.Errorf("at %d columns the label shown whole: %v\n%s", width, whole, screen)
			}
		})
	}
}
