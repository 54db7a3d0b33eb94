package testserver

import (
	"os"
	"slices"
	"testing"
)

// Close runs cleanups last first and removes the temp dirs; Fatalf and
// Skipf reach Fail with their message and whether it was a skip.
func TestEnv(t *testing.T) {
	type failure struct {
		skipped bool
		msg     string
	}
	var got []failure
	e := &Env{Prefix: "dlock-env-", Fail: func(skipped bool, msg string) { got = append(got, failure{skipped, msg}) }}
	var order []int
	e.Cleanup(func() { order = append(order, 1) })
	e.Cleanup(func() { order = append(order, 2) })
	dir := e.TempDir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	e.Skipf("no %s", "redis-server")
	e.Fatalf("port %d", 7)
	e.Close()
	if !slices.Equal(order, []int{2, 1}) {
		t.Fatalf("cleanups ran in order %v; want [2 1]", order)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temp dir after Close: %v; want it removed", err)
	}
	want := []failure{{true, "no redis-server"}, {false, "port 7"}}
	if !slices.Equal(got, want) {
		t.Fatalf("Fail saw %v; want %v", got, want)
	}
	e.Close() // nothing left to run
	if len(order) != 2 {
		t.Fatalf("a second Close ran cleanups again: %v", order)
	}
}
