package sqltest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
)

// GrantTenant runs the "Least privilege" block of the package doc in file
// (the backend's package file) for a tenant of its own: each SQL line,
// rewritten by r, through exec (as a user who may grant); where the block
// says the owner migrates (a "--" comment line), it opens ownerURL and
// migrates, as `dlock migrate` does.
func GrantTenant(t *testing.T, file string, r *strings.Replacer, exec func(stmt string), ownerURL string) {
	t.Helper()
	var lines []string
	for _, l := range drivertest.DocLines(t, file, "Least privilege", "") {
		lines = append(lines, r.Replace(l))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "--") {
			exec(l)
			continue
		}
		c, err := dlock.Open(t.Context(), ownerURL)
		if err != nil {
			t.Fatalf("Open as the owner: %v", err)
		}
		err = c.Migrate(t.Context())
		_ = c.Close()
		if err != nil {
			t.Fatalf("Migrate as the owner: %v", err)
		}
	}
}

// SessionForceUnlock: a's worker (client as, session mode) holds y. b's
// worker (bs, session mode) may not force-release it: its ForceUnlock
// fails with dlock.ErrInvalidConfig, naming right (what ending another
// user's connection needs), and a's lease lives on. An operator with that
// right (the client ops returns, after granting it) may, and a's lease
// then ends.
func SessionForceUnlock(t *testing.T, as, bs *dlock.Client, right string, ops func() *dlock.Client) {
	t.Helper()
	ctx := t.Context()
	ly, err := as.Mutex("y", dlock.WithTTL(5*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.ForceUnlock(ctx, "y"); err == nil || !strings.Contains(err.Error(), right) || !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Fatalf("ForceUnlock of a's session lock by b's worker: %v; want %s named", err, right)
	}
	select {
	case <-ly.Done():
		t.Fatalf("a's session lease lost after b's refused force unlock: %v", ly.Err())
	case <-time.After(100 * time.Millisecond):
	}
	if err := ops().ForceUnlock(ctx, "y"); err != nil {
		t.Fatalf("ForceUnlock by an operator with %s: %v", right, err)
	}
	select {
	case <-ly.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a's session lease still live 10s after the operator's force unlock")
	}
}
