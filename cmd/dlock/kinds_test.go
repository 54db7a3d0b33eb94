package main_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	_ "github.com/dlock/dlock/pglock"
)

// dlock run --shared, --write and --permits, and inspect's readers, writer
// and permits, against PostgreSQL's table mode.
func TestRunKinds(t *testing.T) {
	u := testserver.PostgresURL(testserver.Postgres(t))
	c := drivertest.MustOpen(t, u)
	ctx := t.Context()

	r, err := c.RWMutex("reports", dlock.WithLabel("reader-a")).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res := dlockCmd(t, nil, "run", "--backend", u, "--shared", "--no-wait", "reports", "--", "sh", "-c", "echo $DLOCK_TOKEN"); res.code != 0 || strings.TrimSpace(res.stdout) == "" {
		t.Fatalf("run --shared beside a reader: exit %d %q %q", res.code, res.stdout, res.stderr)
	}
	if res := dlockCmd(t, nil, "run", "--backend", u, "--write", "--no-wait", "reports", "--", "true"); res.code != 3 {
		t.Fatalf("run --write beside a reader: exit %d %q; want 3", res.code, res.stderr)
	}
	if res := dlockCmd(t, nil, "run", "--backend", u, "--no-wait", "reports", "--", "true"); res.code != 0 {
		t.Fatalf("run (the Mutex, another lock) beside a reader: exit %d %q", res.code, res.stderr)
	}
	out := dlockCmd(t, nil, "inspect", "--backend", u, "reports")
	if !strings.Contains(out.stdout, "(read-write): 1 readers: reader-a") {
		t.Fatalf("inspect text: %q", out.stdout)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := c.RWMutex("reports").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res := dlockCmd(t, nil, "run", "--backend", u, "--shared", "--no-wait", "reports", "--", "true"); res.code != 3 {
		t.Fatalf("run --shared beside a writer: exit %d %q; want 3", res.code, res.stderr)
	}
	var info struct {
		RWMutex struct {
			Writer struct {
				Owner string `json:"owner"`
				Token uint64 `json:"token"`
			} `json:"writer"`
		} `json:"rwmutex"`
	}
	out = dlockCmd(t, nil, "inspect", "--backend", u, "-o", "json", "reports")
	if json.Unmarshal([]byte(out.stdout), &info) != nil || info.RWMutex.Writer.Owner != w.Owner() || info.RWMutex.Writer.Token != w.Token() {
		t.Fatalf("inspect json with a writer: %q", out.stdout)
	}
	// Empty lists are kept as [], not null (README: empty fields are kept).
	if !strings.Contains(out.stdout, `"readers": []`) || strings.Contains(out.stdout, `"readers": null`) || strings.Contains(out.stdout, `"holders": null`) {
		t.Errorf("inspect json with a writer and no readers: %q", out.stdout)
	}
	if res := dlockCmd(t, nil, "unlock", "--backend", u, "--force", "--yes", "reports"); res.code != 1 || !strings.Contains(res.stderr, "a read-write lock of this name is held") {
		t.Fatalf("unlock --force of a held read-write lock: exit %d %q %q; want 1 and why", res.code, res.stdout, res.stderr)
	}
	_ = w.Unlock(ctx)

	sem := c.Semaphore("api", 2, dlock.WithLabel("worker-1"))
	p1, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res := dlockCmd(t, nil, "run", "--backend", u, "--permits", "2", "--no-wait", "api", "--", "true"); res.code != 0 {
		t.Fatalf("run --permits 2 with one held: exit %d %q", res.code, res.stderr)
	}
	p2, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res := dlockCmd(t, nil, "run", "--backend", u, "--permits", "2", "--no-wait", "api", "--", "true"); res.code != 3 {
		t.Fatalf("run --permits 2 with both held: exit %d %q; want 3", res.code, res.stderr)
	}
	// 2: the command never ran (it was 1, a command's own failure).
	if res := dlockCmd(t, nil, "run", "--backend", u, "--permits", "3", "api", "--", "true"); res.code != 2 || !strings.Contains(res.stderr, "permit count mismatch") {
		t.Fatalf("run --permits 3 while held with 2: exit %d %q; want 2 and the mismatch", res.code, res.stderr)
	}
	out = dlockCmd(t, nil, "inspect", "--backend", u, "api")
	if !strings.Contains(out.stdout, "(semaphore): 2 of 2 permits held: worker-1") {
		t.Fatalf("inspect text: %q", out.stdout)
	}
	// unlock --force releases a mutex only: for a held semaphore it must
	// not say "not held".
	if res := dlockCmd(t, nil, "unlock", "--backend", u, "--force", "--yes", "api"); res.code != 1 || !strings.Contains(res.stderr, "a semaphore of this name is held") {
		t.Fatalf("unlock --force of a held semaphore: exit %d %q %q; want 1 and why", res.code, res.stdout, res.stderr)
	}
	_ = p1.Unlock(ctx)
	_ = p2.Unlock(ctx)
	if res := dlockCmd(t, nil, "unlock", "--backend", u, "--force", "--yes", "api"); res.code != 0 || !strings.Contains(res.stdout, "not held") {
		t.Fatalf("unlock --force of a free name: exit %d %q %q", res.code, res.stdout, res.stderr)
	}
	if res := dlockCmd(t, nil, "run", "--backend", u, "--permits", "2", "--shared", "api", "--", "true"); res.code != 2 {
		t.Fatalf("run --permits with --shared: exit %d; want 2", res.code)
	}
}

// A backend without the kinds says so, with exit 2.
func TestRunKindsUnsupported(t *testing.T) {
	u := testserver.PostgresURL(testserver.Postgres(t)) + "&mode=session"
	res := dlockCmd(t, nil, "run", "--backend", u, "--permits", "2", "x", "--", "true")
	if res.code != 2 || !strings.Contains(res.stderr, "advisory locks") {
		t.Fatalf("run --permits on session mode: exit %d %q; want 2 and the reason", res.code, res.stderr)
	}
	if res := dlockCmd(t, nil, "run", "--backend", u, "--shared", "--no-wait", "x", "--", "true"); res.code != 0 {
		t.Fatalf("run --shared on session mode: exit %d %q", res.code, res.stderr)
	}
	if res := dlockCmd(t, nil, "unlock", "--backend", u, "--force", "--yes", "--kind", "sem", "x"); res.code != 2 || !strings.Contains(res.stderr, "no semaphores") {
		t.Fatalf("unlock --kind sem on session mode: exit %d %q; want 2 and the reason", res.code, res.stderr)
	}
}

// dlock unlock --force --kind rw|sem drops every hold of the read-write
// lock or semaphore, and only the holds it showed.
func TestUnlockKinds(t *testing.T) {
	u := testserver.PostgresURL(testserver.Postgres(t))
	c := drivertest.MustOpen(t, u)
	ctx := t.Context()
	short := dlock.WithTTL(2 * time.Second)
	wantLost := func(l *dlock.Lease) {
		t.Helper()
		select {
		case <-l.Done():
		case <-time.After(15 * time.Second):
			t.Fatalf("lease of token %d still live after the force", l.Token())
		}
		if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
			t.Fatalf("Err of a force-released lease = %v; want ErrLeaseLost", l.Err())
		}
	}

	w, err := c.RWMutex("stuck", short).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := dlockCmd(t, nil, "unlock", "--backend", u, "--force", "--yes", "--kind", "rw", "-o", "json", "stuck")
	var got struct {
		Released bool   `json:"released"`
		Kind     string `json:"kind"`
		Holders  struct {
			Writer *struct {
				Token uint64 `json:"token"`
			} `json:"writer"`
		} `json:"holders"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &got); res.code != 0 || err != nil || !got.Released || got.Kind != "rw" ||
		got.Holders.Writer == nil || got.Holders.Writer.Token != w.Token() {
		t.Fatalf("unlock --kind rw of a writer: exit %d %q %q", res.code, res.stdout, res.stderr)
	}
	wantLost(w)
	if l, err := c.RWMutex("stuck").TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the force: %v", err)
	} else {
		_ = l.Unlock(ctx)
	}

	sem := c.Semaphore("api", 2, short)
	p1, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The holds shown changed while the operator answered: nothing is dropped.
	answer := askUnlock(t, u, "api", "--kind", "sem")
	if err := p1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	p3, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := answer(); r.code != 1 || !strings.Contains(r.stderr, "the holders changed while you answered") {
		t.Fatalf("holders changed while asking: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if p2.Err() != nil || p3.Err() != nil {
		t.Fatalf("a refused unlock dropped a hold: %v, %v", p2.Err(), p3.Err())
	}
	answer = askUnlock(t, u, "api", "--kind", "sem")
	if r := answer(); r.code != 0 || !strings.Contains(r.stdout, "released the 2 holds shown") {
		t.Fatalf("unlock --kind sem: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	wantLost(p2)
	wantLost(p3)
	if res := dlockCmd(t, nil, "unlock", "--backend", u, "--force", "--yes", "--kind", "sem", "api"); res.code != 0 || !strings.Contains(res.stdout, "not held") {
		t.Fatalf("unlock --kind sem of a free semaphore: exit %d %q %q", res.code, res.stdout, res.stderr)
	}
	if res := dlockCmd(t, nil, "unlock", "--backend", u, "--force", "--kind", "bogus", "api"); res.code != 2 {
		t.Fatalf("unlock --kind bogus: exit %d %q; want 2", res.code, res.stderr)
	}
}
