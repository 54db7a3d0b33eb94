package main_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
)

// The tests of `dlock run` on a terminal, where the command shares dlock's
// process group and a guard process stops what it leaves, and their helpers.

// onTerminal runs the shell command line under script(1), so that dlock's
// stdin is a terminal (and the command shares dlock's process group), with
// in feeding the terminal. script runs line through $SHELL -c, or /bin/sh
// when SHELL is unset (as in CI), and dash does not exec a -c's last
// command: it stays in the terminal's foreground group and dies of a
// Ctrl-C once its command has exited (status 130, whatever dlock's). A
// line that sends Ctrl-C therefore execs dlock, as a user's shell runs it.
func onTerminal(t *testing.T, line string) (cmd *exec.Cmd, in io.WriteCloser, out *syncBuffer) {
	t.Helper()
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("no script(1) to give dlock a terminal")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd = exec.CommandContext(ctx, "script", "-qefc", line, os.DevNull)
	out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 2 * time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "started"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("command did not start:\n%s", out.String())
		}
	}
	return cmd, in, out
}

// childPid reads the pid a command wrote to path, and kills that process
// when the test ends.
func childPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// waitGone fails unless the command's child pid exits within d (when: what
// just happened, for the message; out: dlock's output).
func waitGone(t *testing.T, pid int, d time.Duration, when string, out *syncBuffer) {
	t.Helper()
	for deadline := time.Now().Add(d); !gone(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command's child %d still runs %s:\n%s", pid, when, out.String())
		}
	}
}

// printedPid is the pid the command printed after prefix on a line.
func printedPid(t *testing.T, out *syncBuffer, prefix string) int {
	t.Helper()
	for _, line := range strings.Split(out.String(), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			if pid, err := strconv.Atoi(p); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no line %q:\n%s", prefix, out.String())
	return 0
}

// gone reports whether pid has exited (a zombie counts as exited).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) != nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// With a terminal for stdin the command shares dlock's process group, so a
// lost lease cannot be signalled to a group of the command's own: the
// command's children (a script's workers) ran on after dlock stopped the
// command and exited 4. The guard now signals every process below it.
func TestRunOnTerminalLostStopsChildren(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the guard is Linux's")
	}
	u := redisURL(t)
	pidf := filepath.Join(t.TempDir(), "pid")
	// The terminal stays open after dlock exits: its hangup would kill
	// the child by itself.
	_, _, out := onTerminal(t, bin+" run --backend "+u+" --ttl 3s --grace 1s ptylost -- sh -c 'sleep 300 & echo $! > "+pidf+"; echo started; wait'; echo dlock exited $?; sleep 30")
	pid := childPid(t, pidf)
	if err := drivertest.MustOpen(t, u).ForceUnlock(t.Context(), "ptylost"); err != nil {
		t.Fatal(err)
	}
	waitDlockExited(t, out)
	if !strings.Contains(out.String(), "dlock exited 4") {
		t.Fatalf("want exit 4:\n%s", out.String())
	}
	waitGone(t, pid, 10*time.Second, "after the lease was lost", out)
}

// Ctrl-C on the terminal reaches the command once: the terminal sends it
// to the whole foreground group, the command included, and dlock, in that
// group too, no longer forwards it a second time (a tool that takes a
// second interrupt as "exit at once" skipped its clean-up).
func TestRunOnTerminalCtrlCOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("dlock tells a terminal's signals from others on Linux")
	}
	u := redisURL(t)
	cmd, in, out := onTerminal(t, "exec "+bin+" run --backend "+u+" ctrlc -- sh -c 'n=0; on_int() { n=$((n+1)); echo got INT $n; }; trap on_int INT; echo started; while [ $n -lt 2 ]; do sleep 0.1; done; echo done'")
	if _, err := in.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a second delivery, if any, comes within ms
	if strings.Contains(out.String(), "got INT 2") || !strings.Contains(out.String(), "got INT 1") {
		t.Errorf("Ctrl-C delivered other than once:\n%s", out.String())
	}
	if _, err := in.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, 30*time.Second, out); code != 0 {
		t.Fatalf("exit %d after the second Ctrl-C:\n%s", code, out.String())
	}
}

// A command stopped for a lost lease that exits at its SIGTERM leaves no
// child running: one that ignores SIGTERM used to run on, because the
// SIGKILL after --grace went through the guard, which had exited with the
// command. Without a terminal (its group) and with one (the processes
// below the guard).
func TestRunLostKillsWhatTheCommandLeft(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the guard is Linux's")
	}
	u := redisURL(t)
	script := `sh -c 'trap "" TERM; exec sleep 106' & echo $! > "$0"; echo started; sleep 107`
	for _, terminal := range []bool{false, true} {
		pidf := filepath.Join(t.TempDir(), "pid")
		name := fmt.Sprintf("left-%v", terminal)
		var out *syncBuffer
		if terminal {
			_, _, out = onTerminal(t, bin+" run --backend "+u+" --ttl 3s --grace 30s "+name+" -- sh -c '"+strings.ReplaceAll(script, "'", `'"'"'`)+"' "+pidf+"; echo dlock exited $?; sleep 30")
		} else {
			_, out, _ = startRun(t, "run", "--backend", u, "--ttl", "3s", "--grace", "30s", name, "--", "sh", "-c", script, pidf)
		}
		pid := childPid(t, pidf)
		if err := drivertest.MustOpen(t, u).ForceUnlock(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		// Well before --grace (30 s): the command exited at its SIGTERM.
		waitGone(t, pid, 15*time.Second, fmt.Sprintf("(terminal=%v, ignoring SIGTERM) after the command was stopped", terminal), out)
	}
}

// On a terminal the guard is the subreaper of the command's orphans, and
// reaps them: they stayed zombies until the command ended.
func TestRunOnTerminalReapsOrphans(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the guard is Linux's")
	}
	u := redisURL(t)
	_, _, out := onTerminal(t, "exec "+bin+" run --backend "+u+" orphans -- sh -c 'i=0; while [ $i -lt 20 ]; do (sleep 0.01 &); i=$((i+1)); done; echo started pid $$; sleep 30'")
	cmdPid := printedPid(t, out, "started pid ")
	guard := parentOf(t, cmdPid)
	zombies := func() int {
		n := 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			p, err := strconv.Atoi(e.Name())
			if err != nil || p == cmdPid {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(b)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			if len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(guard) {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for n := zombies(); n > 0; n = zombies() {
		if time.Now().After(deadline) {
			t.Fatalf("%d zombie children of the guard (pid %d) while the command runs", n, guard)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// On a terminal a signal sent to dlock reaches the command once through a
// wrapper that relays it (timeout): sent to every process below the guard,
// the wrapped command got it from the guard and again from timeout.
func TestRunOnTerminalRelayedSignalOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the guard is Linux's")
	}
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("no timeout(1)")
	}
	u := redisURL(t)
	_, _, out := onTerminal(t, "exec "+bin+" run --backend "+u+" relayed -- timeout 60 sh -c 'n=0; on_term() { n=$((n+1)); echo got TERM $n; }; trap on_term TERM; echo started wrapper $PPID; while [ $n -lt 1 ]; do sleep 0.1; done; sleep 1; echo done $n'")
	wrapper := printedPid(t, out, "started wrapper ")
	dlockPid := parentOf(t, parentOf(t, wrapper)) // timeout's parent is the guard, the guard's dlock
	if err := syscall.Kill(dlockPid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "done"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command did not finish:\n%s", out.String())
		}
	}
	if !strings.Contains(out.String(), "done 1") {
		t.Errorf("SIGTERM reached the wrapped command other than once:\n%s", out.String())
	}
}

// With a terminal for stdin the command shares dlock's group, so when the
// guard alone was killed dlock had no group of the command's to kill: the
// parent-death signal ended the command, and its children ran on without
// the lock. dlock is now their subreaper and kills what it adopts.
func TestRunOnTerminalGuardKilledStopsChildren(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the guard is Linux's")
	}
	u := redisURL(t)
	pidf := filepath.Join(t.TempDir(), "pid")
	_, _, out := onTerminal(t, bin+" run --backend "+u+" ptyguard -- sh -c 'sleep 300 & echo $! > "+pidf+"; echo started; wait'; echo dlock exited $?; sleep 30")
	pid := childPid(t, pidf)
	command := parentOf(t, pid)
	guard := parentOf(t, command)
	if err := syscall.Kill(guard, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, 10*time.Second, "after the guard was killed", out)
	waitDlockExited(t, out)
}

// waitDlockExited waits for the line an onTerminal command line prints
// once dlock has exited ("dlock exited STATUS").
func waitDlockExited(t *testing.T, out *syncBuffer) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "dlock exited"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("dlock did not exit:\n%s", out.String())
		}
	}
}
