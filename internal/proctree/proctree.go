// Package proctree reads the process tree from /proc, for the code that
// must reach every process below one it started: the CLI's child
// commands, and the test harness's servers (some of whose children leave
// their process group).
package proctree

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Read returns every process's children, and which processes are zombies
// (exited, not yet reaped), as /proc shows them when it is read. Without
// /proc both maps are empty.
func Read() (children map[int][]int, zombie map[int]bool) {
	children, zombie = map[int][]int{}, map[int]bool{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return children, zombie
	}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
			zombie[p] = f[0] == "Z"
		}
	}
	return children, zombie
}

// Signal sends sig to every process below pid, as /proc shows the tree
// when it is read (one started meanwhile may be missed).
func Signal(pid int, sig syscall.Signal) {
	children, _ := Read()
	for todo := children[pid]; len(todo) > 0; {
		p := todo[0]
		todo = append(todo[1:], children[p]...)
		_ = syscall.Kill(p, sig)
	}
}
