package sqltest

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// ForeignHolderExcludes: a lock that the server's own client holds and c,
// in session mode, exclude each other. holder is that client, started,
// taking the lock on name and holding it until it exits. c sees name held,
// its TryLock fails, and its Lock is granted once holder ends; then
// foreignTry, the server's client trying the same lock, must find it taken
// (foreignTry fails t if it is not).
func ForeignHolderExcludes(t *testing.T, c *dlock.Client, name string, holder *exec.Cmd, foreignTry func(t *testing.T)) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(5 * time.Second)
	for { // until the server's client holds it
		info, err := c.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never took the lock on %q", holder.Path, name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.Mutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while %s holds %q: %v", holder.Path, name, err)
	}
	l, err := c.Mutex(name).Lock(ctx) // granted when the holder's session ends
	if err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	foreignTry(t) // and the other way: its try fails while dlock holds
	_ = l.Unlock(ctx)
}

// OldShapeMigrated: c was opened on a dlock_locks made before holder labels
// and release ids (no label or released column) that held "old" for
// "old-owner". Open added the columns and kept the row; holds carry labels
// from then on; Migrate can run again; the old row's releases work.
func OldShapeMigrated(t *testing.T, c *dlock.Client) {
	t.Helper()
	ctx := t.Context()
	if info, err := c.Inspect(ctx, "old"); err != nil || !info.Held || info.Owner != "old-owner" || info.Label != "" {
		t.Fatalf("Inspect of the old hold = %+v, %v; want held by old-owner with no label", info, err)
	}
	l, err := c.Mutex("new", dlock.WithLabel("worker-7")).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := c.Inspect(ctx, "new"); err != nil || info.Label != "worker-7" {
		t.Fatalf("Inspect = %+v, %v; want label worker-7", info, err)
	}
	if err := c.Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The old row's owner re-enters and releases: the release records its
	// id in the column Open added.
	old, err := c.Mutex("old", dlock.WithOwner("old-owner")).TryLock(ctx)
	if err != nil {
		t.Fatalf("re-entry of the old hold: %v", err)
	}
	if err := old.Unlock(ctx); err != nil {
		t.Fatalf("release of the re-entry: %v", err)
	}
	if info, err := c.Inspect(ctx, "old"); err != nil || !info.Held || info.Holds != 1 {
		t.Fatalf("Inspect of the old hold after its re-entry's release = %+v, %v; want its 1 hold", info, err)
	}
}
