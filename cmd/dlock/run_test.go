package main_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// startRun starts `dlock run` with args and waits until its command has
// printed "started"; it returns the command, its combined output and the
// command's pid (the child prints $$ before "started").
func startRun(t *testing.T, args ...string) (*exec.Cmd, *syncBuffer, int) {
	t.Helper()
	return startRunWith(t, nil, args...)
}

// startRunWith is startRun with attr as dlock's SysProcAttr.
func startRunWith(t *testing.T, attr *syscall.SysProcAttr, args ...string) (*exec.Cmd, *syncBuffer, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = attr
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// A command that outlives dlock keeps the output pipe open: do not wait
	// for it to close.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "started") {
		if time.Now().After(deadline) {
			t.Fatalf("command did not start:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var pid int
	for _, line := range strings.Split(out.String(), "\n") {
		if p, ok := strings.CutPrefix(line, "pid "); ok {
			pid, _ = strconv.Atoi(p)
		}
	}
	if pid > 0 {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	return cmd, out, pid
}

// waitExit waits up to d for cmd to exit and returns its exit status.
func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration, out *syncBuffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
			t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("dlock run did not exit within %v:\n%s", d, out.String())
		return -1
	}
}

// The first SIGTERM sent to dlock run reaches the command, every time (it
// used to be taken by a second receiver of the signal channel in most runs).
func TestRunForwardsFirstSignal(t *testing.T) {
	u := redisURL(t)
	for i := range 5 {
		cmd, out, _ := startRun(t, "run", "--backend", u, "sig", "--",
			"sh", "-c", `trap 'echo got-TERM; exit 0' TERM; echo pid $$; echo started; while :; do sleep 0.05; done`)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd, 20*time.Second, out); code != 0 || !strings.Contains(out.String(), "got-TERM") {
			t.Fatalf("run %d: exit %d; the command did not get the first SIGTERM:\n%s", i, code, out.String())
		}
	}
}

// A signal forwarded to a stopped command is followed by SIGCONT, so the
// command gets it: a command stopped (SIGSTOP, a terminal's stop) kept the
// SIGTERM pending, and `timeout dlock run` alive and holding the lock, for
// good (an adversary pass: still held 600 s later).
func TestRunSignalReachesStoppedCommand(t *testing.T) {
	u := redisURL(t)
	cmd, out, pid := startRun(t, "run", "--backend", u, "stopped", "--",
		"sh", "-c", `echo pid $$; echo started; kill -STOP $$; sleep 60`)
	for deadline := time.Now().Add(20 * time.Second); procState(t, pid) != "T"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command never stopped (state %q):\n%s", procState(t, pid), out.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, 20*time.Second, out); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want %d (the command ended by the SIGTERM):\n%s", code, 128+int(syscall.SIGTERM), out.String())
	}
}

// procState is pid's state letter from /proc (T: stopped).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0]
}

// cpuTime returns the user+system CPU time pid has used, from /proc.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// Fields after the command name, which is in parentheses: state is
	// field 3, utime and stime are 14 and 15, in clock ticks (100 Hz on
	// Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// After the lease is lost, dlock run waits out --grace without spinning (it
// used to burn about a CPU-second per second), and says once that the
// lease was lost.
func TestRunGraceDoesNotSpin(t *testing.T) {
	u := redisURL(t)
	c := drivertest.MustOpen(t, u)
	const grace = 6 * time.Second
	cmd, out, _ := startRun(t, "run", "--backend", u, "--ttl", "1s", "--grace", grace.String(), "stubborn", "--",
		"sh", "-c", `trap 'echo ignoring-TERM' TERM; echo pid $$; echo started; while :; do sleep 0.05; done`)
	if err := c.ForceUnlock(t.Context(), "stubborn"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "ignoring-TERM") {
		if time.Now().After(deadline) {
			t.Fatalf("no SIGTERM after the lease was lost:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := cpuTime(t, cmd.Process.Pid)
	t0 := time.Now()
	time.Sleep(grace * 2 / 3)
	used, wall := cpuTime(t, cmd.Process.Pid)-before, time.Since(t0)
	if used > wall/10 { // idle waiting takes about nothing; spinning, a whole core if it can get one
		t.Errorf("dlock run used %v of CPU in %v of its grace period: it spins", used, wall.Round(time.Millisecond))
	}
	if code := waitExit(t, cmd, 30*time.Second, out); code != 4 {
		t.Fatalf("exit %d, want 4 (lease lost):\n%s", code, out.String())
	}
	lines := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "lost") {
			lines++
		}
	}
	if n := lines; n != 1 {
		t.Errorf("the loss is reported %d times, want once:\n%s", n, out.String())
	}
	t.Logf("CPU during %v of grace: %v", wall.Round(time.Millisecond), used)
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// kill -9 of dlock run does not leave its command running without the lock:
// the guard kills the command with it (on Linux).
func TestRunChildDiesWithDlock(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs Linux /proc")
	}
	u := redisURL(t)
	cmd, out, pid := startRun(t, "run", "--backend", u, "--ttl", "2s", "guarded", "--",
		"sh", "-c", `echo pid $$; echo started; while :; do sleep 0.05; done`)
	if pid == 0 || !alive(pid) {
		t.Fatalf("no command pid:\n%s", out.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the command (pid %d) still runs 10s after dlock run was killed with SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Its lock expires with its TTL, and the next run takes it.
	if r := dlockCmd(t, nil, "run", "--backend", u, "--wait", "30s", "guarded", "--", "true"); r.code != 0 {
		t.Fatalf("next run: exit %d %s", r.code, r.stderr)
	}
}

// kill -9 of dlock run stops the command's own children too, not only the
// command: a script whose work is done by a child it started (in the
// background here, as a cron script may) must not go on writing once the
// lock's TTL has freed the name. The parent-death signal alone reached only
// the command, and the child ran on unguarded.
func TestRunGrandchildDiesWithDlock(t *testing.T) {
	cmd, pid, gpid, log := startGrandchild(t, "k9")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	wantGone(t, "dlock run was killed with SIGKILL", pid, gpid, log)
}

// startGrandchild runs, under dlock run, a command that starts a child
// writing to a log every 50 ms; it returns dlock, the command's and the
// child's pids, and the log's path.
func startGrandchild(t *testing.T, name string) (cmd *exec.Cmd, pid, gpid int, log string) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs Linux /proc")
	}
	u := redisURL(t)
	log = filepath.Join(t.TempDir(), "log")
	// dlock in a process group of its own, as a shell's job is, so that a
	// test can kill the group.
	cmd, out, pid := startRunWith(t, &syscall.SysProcAttr{Setpgid: true}, "run", "--backend", u, "--ttl", "2s", name, "--",
		"sh", "-c", `sh -c 'while :; do echo x >> "$0"; sleep 0.05; done' "$0" &
echo grandchild $!; echo pid $$; echo started; wait`, log)
	for _, line := range strings.Split(out.String(), "\n") {
		if p, ok := strings.CutPrefix(line, "grandchild "); ok {
			gpid, _ = strconv.Atoi(p)
		}
	}
	if pid == 0 || gpid == 0 || !alive(gpid) {
		t.Fatalf("no command or grandchild pid:\n%s", out.String())
	}
	t.Cleanup(func() { _ = syscall.Kill(gpid, syscall.SIGKILL) })
	// The grandchild has written: on a busy machine a kill could otherwise
	// come before its first line, and the log that shows it stopped would
	// not be there.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(log); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the grandchild wrote nothing to its log in 30s:\n%s", out.String())
		}
	}
	return cmd, pid, gpid, log
}

// wantGone fails t unless the command (pid) and its child (gpid) are dead
// within 10 s of what happened, and the child's log has stopped growing.
func wantGone(t *testing.T, what string, pid, gpid int, log string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) || alive(gpid) {
		if time.Now().After(deadline) {
			t.Fatalf("10s after %s, the command (pid %d) alive: %v, its child (pid %d) alive: %v",
				what, pid, alive(pid), gpid, alive(gpid))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Nothing writes the log any more: it stops growing.
	size := func() int64 {
		fi, err := os.Stat(log)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	time.Sleep(500 * time.Millisecond) // ten of the loop's turns
	if after := size(); after != before {
		t.Fatalf("the log still grows (%d to %d bytes) after its writer was found gone", before, after)
	}
}

// SIGKILL of the guard process (not of dlock) killed the command by its
// parent-death signal but left the command's child running after dlock
// released the lock: dlock now kills the command's group when its guard
// dies of a signal.
func TestRunGrandchildDiesWithGuard(t *testing.T) {
	cmd, pid, gpid, log := startGrandchild(t, "k9-guard")
	guard := parentOf(t, pid)
	if guard == cmd.Process.Pid {
		t.Fatalf("the command's parent is dlock (%d), not a guard", guard)
	}
	if err := syscall.Kill(guard, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantGone(t, "the guard was killed with SIGKILL", pid, gpid, log)
	_ = cmd.Wait()
}

// A kill of dlock's whole process group (kill -9 %job, a supervisor's
// group kill) killed the guard with dlock, as it was in dlock's group: the
// command died of its parent-death signal, its child ran on after the
// lock's TTL. The guard is now in a group of its own.
func TestRunGrandchildDiesWithDlocksGroup(t *testing.T) {
	cmd, pid, gpid, log := startGrandchild(t, "k9-group")
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	wantGone(t, "dlock's process group was killed with SIGKILL", pid, gpid, log)
}

// parentOf returns the parent pid of pid, from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// A signal while waiting for the lock ends the wait: the command does not
// start, and dlock exits as the signal's 128+N.
func TestRunSignalWhileWaiting(t *testing.T) {
	u := redisURL(t)
	l, err := drivertest.MustOpen(t, u).Mutex("queue").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	cmd := exec.CommandContext(t.Context(), bin, "run", "--backend", u, "-v", "queue", "--", "echo", "ran")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // it waits, the lock being held, with its signal handling set up
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, 20*time.Second, out); code != 128+int(syscall.SIGTERM) ||
		strings.Contains(out.String(), "ran") || !strings.Contains(out.String(), "interrupted") {
		t.Fatalf("exit %d, output %q", code, out.String())
	}
}

// With -o json, run reports a lost lease as one JSON event on stderr.
func TestRunLeaseLostJSON(t *testing.T) {
	u := redisURL(t)
	cmd, out, _ := startRun(t, "run", "-o", "json", "--backend", u, "--ttl", "1s", "--grace", "5s", "jsonjob", "--",
		"sh", "-c", `echo pid $$; echo started; trap 'exit 0' TERM; while :; do sleep 0.05; done`)
	if err := drivertest.MustOpen(t, u).ForceUnlock(t.Context(), "jsonjob"); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, 30*time.Second, out); code != 4 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	var events int
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "lost") {
			m := jsonKeys(t, "lease_lost event", line, "event", "name", "error", "grace_ms")
			if m["event"] != "lease_lost" || m["name"] != "jsonjob" || m["grace_ms"] != float64(5000) {
				t.Errorf("event %s", line)
			}
			events++
		}
	}
	if events != 1 {
		t.Errorf("%d loss reports, want one JSON event:\n%s", events, out.String())
	}
}

// A lock force-released while the command runs, found gone only by the
// final unlock (the TTL is long, so no renewal sees it first): run says so
// on stderr and exits 4, on every store.
func TestRunLostAtUnlock(t *testing.T) {
	for _, b := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"redis", redisURL},
		{"etcd", func(t *testing.T) string { return "etcd://" + testserver.Etcd(t).Addr() }},
		{"postgres", func(t *testing.T) string { return testserver.PostgresURL(testserver.Postgres(t)) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			u := b.url(t)
			done := filepath.Join(t.TempDir(), "done")
			cmd, out, _ := startRun(t, "run", "--backend", u, "--ttl", "60s", "gone", "--",
				"sh", "-c", `echo started; while [ ! -e "$0" ]; do sleep 0.05; done`, done)
			if err := drivertest.MustOpen(t, u).ForceUnlock(t.Context(), "gone"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(done, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd, 30*time.Second, out); code != 4 || !strings.Contains(out.String(), `lease on "gone" was lost before sh ended (exit status 0)`) {
				t.Fatalf("exit %d, want 4 and the loss on stderr:\n%s", code, out.String())
			}
		})
	}
}

// TestRunUsage: a command that cannot start exits 127 (not found) or 126
// (not executable), as env and timeout do; flags that contradict each
// other, --permits 0 and a missing command are usage errors (2) with our
// usage line, before anything is locked.
func TestRunUsage(t *testing.T) {
	u := redisURL(t)
	notExec := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho ran\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"x", "--", "/nonexistent/cmd"}, 127, "start /nonexistent/cmd"},
		{[]string{"x", "--", "no-such-command-dlock"}, 127, "executable file not found"},
		{[]string{"x", "--", notExec}, 126, "permission denied"},
		{[]string{"--permits", "0", "x", "--", "true"}, 2, "--permits must be at least 1"},
		{[]string{"--label", "\xff", "x", "--", "true"}, 2, "label"}, // was 1, not a usage error
		{[]string{"--label", strings.Repeat("l", 300), "x", "--", "true"}, 2, "label"},
		{[]string{"--wait", "1s", "--no-wait", "x", "--", "true"}, 2, "--wait and --no-wait are exclusive"},
		{[]string{"x"}, 2, "usage: dlock run [flags] NAME -- CMD"},
		{[]string{"x", "--", ""}, 2, "CMD is empty"}, // was 1, "start : exec: no command", after locking
		{[]string{"--wait", "-1s", "x", "--", "true"}, 2, "--wait must not be negative"},
	} {
		r := dlockCmd(t, nil, append([]string{"run", "--backend", u}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stdout, "ran") {
			t.Errorf("run %q: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	for _, args := range [][]string{{"x"}, {"x", "v"}, {"x", "v", "true"}} { // elect without "-- CMD": our usage line, not cobra's
		r := dlockCmd(t, nil, append([]string{"elect", "--backend", u}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "usage: dlock elect [flags] NAME VALUE -- CMD") {
			t.Errorf("elect %q: exit %d, stderr %q; want 2 and the usage line", args, r.code, r.stderr)
		}
	}
}

// A --wait shorter than a round trip still tries once: --wait 1us gave up
// on a free lock, exit 3, without trying. A held lock is waited for no
// longer than --wait after that try.
func TestRunShortWaitTriesOnce(t *testing.T) {
	u := redisURL(t)
	if r := dlockCmd(t, nil, "run", "--backend", u, "--wait", "1us", "free", "--", "sh", "-c", "echo ran"); r.code != 0 || !strings.Contains(r.stdout, "ran") {
		t.Fatalf("--wait 1us on a free lock: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	l, err := drivertest.MustOpen(t, u).Mutex("held").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	if r := dlockCmd(t, nil, "run", "--backend", u, "--wait", "1us", "held", "--", "sh", "-c", "echo ran"); r.code != 3 || !strings.Contains(r.stderr, "--wait 1µs elapsed") {
		t.Fatalf("--wait 1us on a held lock: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A URL with no host is shown as written: "open redis://: …", not
// "open redis:: …" (url.URL prints "redis:").
func TestHostlessURLShown(t *testing.T) {
	for _, u := range []string{"redis://", "etcd://", "postgres://"} {
		r := dlockCmd(t, nil, "ls", "--backend", u, "--connect-timeout", "2s")
		if r.code != 2 || !strings.Contains(r.stderr, "open "+u+":") || strings.Contains(r.stderr, "::") {
			t.Errorf("%s: exit %d, stderr %q", u, r.code, r.stderr)
		}
	}
}

// TestVerbosityLevels: on etcd, -v shows warnings only, not a debug line
// for every normal RPC; -vv shows the debug lines too.
func TestVerbosityLevels(t *testing.T) {
	u := "etcd://" + testserver.Etcd(t).Addr()
	r := dlockCmd(t, nil, "run", "--backend", u, "-v", "v1", "--", "true")
	if r.code != 0 || strings.Contains(r.stderr, "DEBUG") {
		t.Errorf("-v: exit %d, stderr %q; want no debug lines", r.code, r.stderr)
	}
	r = dlockCmd(t, nil, "run", "--backend", u, "-vv", "v2", "--", "true")
	if r.code != 0 || !strings.Contains(r.stderr, "level=DEBUG") {
		t.Errorf("-vv: exit %d, stderr %q; want debug lines", r.code, r.stderr)
	}
}

// TestChildEnvWithoutURL: run and elect do not pass DLOCK_URL (and its
// password) to the command unless --pass-url.
func TestChildEnvWithoutURL(t *testing.T) {
	u := redisURL(t)
	env := []string{"DLOCK_URL=" + u}
	show := []string{"--", "sh", "-c", `echo "url=[${DLOCK_URL-unset}] name=[$DLOCK_NAME]"`}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"run", "envjob"}, show...), "url=[unset] name=[envjob]"},
		{append([]string{"run", "--pass-url", "envjob"}, show...), "url=[" + u + "] name=[envjob]"},
		{append([]string{"elect", "envel", "v1"}, show...), "url=[unset] name=[envel]"},
		{append([]string{"elect", "--pass-url", "envel", "v1"}, show...), "url=[" + u + "] name=[envel]"},
	} {
		r := dlockCmd(t, env, tc.args...)
		if r.code != 0 || !strings.Contains(r.stdout, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}
