package proctree

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Signal reaches a grandchild that left the process group: the shell
// waits for it, so the shell ends only once the grandchild is killed.
func TestSignalReachesGrandchildren(t *testing.T) {
	cmd := exec.Command("sh", "-c", "setsid sleep 600 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	pid := cmd.Process.Pid
	t.Cleanup(func() { Signal(pid, syscall.SIGKILL) })
	for {
		children, zombie := Read()
		if len(children[pid]) > 0 {
			if zombie[children[pid][0]] {
				t.Fatal("the shell's child exited by itself")
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	go func() { done <- cmd.Wait() }()
	Signal(pid, syscall.SIGKILL)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shell: %v; want it to end once its child was killed", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the shell still waits for its child 30 s after Signal")
	}
}
