package zklock_test

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// curatorJars are Debian's libcurator-recipes-java and what it needs.
var curatorJars = []string{"curator-recipes", "curator-framework", "curator-client", "zookeeper", "zookeeper-jute", "guava", "slf4j-api", "slf4j-nop"}

// curator runs testdata/CuratorLock.java: an Apache Curator InterProcessMutex
// on path, driven line by line.
type curator struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

func startCurator(t *testing.T, addr, path string) *curator {
	t.Helper()
	return startCuratorProgram(t, "testdata/CuratorLock.java", addr, path)
}

// startCuratorProgram runs one of testdata's Curator programs with args.
func startCuratorProgram(t *testing.T, program string, args ...string) *curator {
	t.Helper()
	java := testserver.LookBinary(t, "java")
	testserver.LookBinary(t, "javac") // java runs a source file only with a JDK
	cp := make([]string, len(curatorJars))
	for i, j := range curatorJars {
		cp[i] = filepath.Join("/usr/share/java", j+".jar")
		if _, err := os.Stat(cp[i]); err != nil {
			if os.Getenv(testserver.RequireEnv) == "1" {
				t.Fatalf("%s missing and %s=1: run scripts/install-deps.sh", cp[i], testserver.RequireEnv)
			}
			t.Skipf("%s missing: install libcurator-recipes-java", cp[i])
		}
	}
	cmd := exec.Command(java, append([]string{"-cp", strings.Join(cp, ":"), program}, args...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	c := &curator{t: t, in: in, out: bufio.NewScanner(out)}
	c.expect("ready", 60*time.Second)
	return c
}

// send writes a command and returns its answer.
func (c *curator) send(cmd string, within time.Duration) string {
	c.t.Helper()
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		c.t.Fatalf("curator %s: %v", cmd, err)
	}
	return c.answer(within)
}

// queue sends a command that Curator answers later (a lock it waits for),
// and gives it time to queue.
func (c *curator) queue(cmd string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		c.t.Fatalf("curator %s: %v", cmd, err)
	}
	time.Sleep(300 * time.Millisecond)
}

func (c *curator) answer(within time.Duration) string {
	c.t.Helper()
	line := make(chan string, 1)
	go func() {
		if c.out.Scan() {
			line <- c.out.Text()
		}
		close(line)
	}()
	select {
	case l, ok := <-line:
		if !ok {
			c.t.Fatal("curator exited")
		}
		return l
	case <-time.After(within):
		c.t.Fatalf("curator: no answer within %v", within)
	}
	return ""
}

func (c *curator) expect(want string, within time.Duration) {
	c.t.Helper()
	if got := c.answer(within); got != want {
		c.t.Fatalf("curator said %q; want %q", got, want)
	}
}

// Apache Curator's InterProcessMutex and dlock exclude each other on one
// path, both ways, and each waiter gets the lock when the other releases.
func TestCuratorInterop(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	cur := startCurator(t, srv.Addr(), "/interop/curator")
	c := drivertest.Client(t, &harness{addr: srv.Addr()})
	ctx := t.Context()
	m := c.Mutex("interop/curator")

	// Curator holds; dlock is refused, then waits and gets it on release.
	if got := cur.send("lock", 30*time.Second); got != "locked" {
		t.Fatalf("curator lock: %q", got)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("dlock TryLock while Curator holds: %v", err)
	}
	// Curator's node holds the client's address, not a dlock label.
	if info, err := c.Inspect(ctx, "interop/curator"); err != nil || !info.Held || info.Label != "" {
		t.Fatalf("Inspect while Curator holds = %+v, %v; want held, with no label", info, err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-got:
		t.Fatal("dlock got the lock while Curator held it")
	case <-time.After(500 * time.Millisecond):
	}
	if got := cur.send("unlock", 10*time.Second); got != "unlocked" {
		t.Fatalf("curator unlock: %q", got)
	}
	var l *dlock.Lease
	select {
	case l = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("dlock did not get the lock after Curator released it")
	}
	if l == nil {
		t.FailNow()
	}

	// dlock holds; Curator is refused, then waits and gets it on release.
	if got := cur.send("try 300", 10*time.Second); got != "busy" {
		t.Fatalf("curator acquire(300ms) while dlock holds: %q", got)
	}
	cur.queue("lock")
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	cur.expect("locked", 10*time.Second)
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("dlock TryLock after Curator re-took it: %v", err)
	}
	if got := cur.send("unlock", 10*time.Second); got != "unlocked" {
		t.Fatalf("curator unlock: %q", got)
	}
}
