package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/dlock/dlock/internal/proctree"
)

// On Linux, dlock run (and elect) start the command through a guard: the
// dlock binary run again as `dlock __run-guard`, which starts the command
// and kills its whole process group with SIGKILL the moment dlock dies, by
// any means, kill -9 included. The kernel's parent-death signal, which
// dlock once set on the command itself, reaches the command only: the
// children it started (a script's workers) ran on, unguarded, once the
// lock's TTL had freed the name.
//
// The guard learns of dlock's death from a socket: dlock holds one end
// (close-on-exec, so no other process has it), the guard the other, and the
// kernel closes dlock's end however dlock dies, so the guard reads EOF. This
// needs no signal to be armed in time: if dlock died even before the guard
// ran, the guard reads EOF at once and kills what it has just started. The
// guard has no parent-death signal itself (SIGKILL would leave it no time
// to kill the group). The other way round, if the guard itself is killed,
// its parent-death signal kills the command, and dlock, which sees the
// guard die of a signal, kills the command's group; or, with a terminal
// (the command shares dlock's group), every process it adopted as their
// subreaper when the guard died. The guard runs in a process group of its
// own, so a kill of dlock's group does not reach it. Only dlock and the
// guard both killed by pid (kill -9 DLOCK GUARD) leave the command's
// children running.
//
// The socket also carries the rest of what dlock and the guard say to each
// other. The guard writes one line: "ok PID" once the command runs, or
// "err ERRNO MESSAGE" (MESSAGE quoted) if it could not be started. dlock
// writes one byte per signal for the guard to send to the command's group
// (or to the command alone, if it shares dlock's group). The guard exits with the command's status (128+N if signal N
// killed it), which is what dlock reports as the command's.

// guardArg is the guard's argv[1]; its arguments are "group" or "own" (the
// command gets a process group of its own, or stays in dlock's), the
// command's path, and its argv.
const guardArg = "__run-guard"

// runGuardIfAsked runs the guard and exits, if this process is one.
func runGuardIfAsked() {
	if len(os.Args) < 5 || os.Args[1] != guardArg {
		return
	}
	os.Exit(runGuard(os.Args[2] == "group", os.Args[3], os.Args[4:]))
}

// startChild starts argv with env through a guard (see above), the command
// in a process group of its own if group.
func startChild(argv, env []string, group bool) (*startedChild, error) {
	// The command is looked for in dlock's PATH, as exec.Command does: a
	// command not found is said by the same error as without a guard.
	look := exec.Command(argv[0])
	if look.Err != nil {
		return nil, look.Err
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("guard socket: %v", err)
	}
	link := os.NewFile(uintptr(fds[0]), "dlock-guard")
	theirs := os.NewFile(uintptr(fds[1]), "dlock-guard")
	mode := "own"
	if group {
		mode = "group"
	}
	// /proc/self/exe is this binary even if its file was replaced or
	// removed since dlock started.
	guard := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       append([]string{"dlock", guardArg, mode, look.Path}, argv...),
		Env:        env,
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{theirs}, // its fd 3
		// With its command in a group of its own, the guard leaves dlock's
		// group too: a kill of dlock's whole group (kill -9 %job, a
		// supervisor's) then leaves the guard alive to kill the command's.
		// With a terminal the command shares dlock's group, and so does
		// the guard, for job control.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: group},
	}
	if !group {
		// Sharing dlock's group, the command has no group for dlock to
		// kill if the guard is killed: as their subreaper dlock adopts
		// what the guard leaves (see killAdopted).
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	}
	err = guard.Start()
	theirs.Close()
	if err != nil {
		link.Close()
		// %v: an error of the guard's start is not the command's (not
		// found: 127), it is dlock's.
		return nil, fmt.Errorf("start the guard: %v", err)
	}
	report, _ := bufio.NewReader(link).ReadString('\n') // a failed read leaves it short, said below
	pid, ok := 0, false
	if p, found := strings.CutPrefix(strings.TrimSuffix(report, "\n"), "ok "); found {
		pid, err = strconv.Atoi(p)
		ok = err == nil && pid > 0
	}
	if !ok {
		link.Close()
		werr := guard.Wait()
		if f, isErr := parseStartFailure(report); isErr {
			return nil, f
		}
		return nil, fmt.Errorf("the guard ended without starting the command (%v, said %q)", werr, report)
	}
	exited := make(chan error, 1)
	go func() {
		err := guard.Wait()
		if group && killed(guard.ProcessState) {
			// The guard was killed (by a signal it cannot catch): the
			// parent-death signal ended the command, not the processes it
			// started, which would run on unguarded once the lock is
			// released. The group's id is the command's pid.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		if !group && killed(guard.ProcessState) {
			killAdopted(5 * time.Second)
		}
		link.Close() // only now: closing it earlier kills the command
		exited <- err
	}()
	return &startedChild{
		pid: pid,
		signal: func(sig syscall.Signal) {
			_, _ = link.Write([]byte{byte(sig)})
		},
		stop: func() {
			_, _ = link.Write([]byte{stopByte})
		},
		exited: exited,
	}, nil
}

// killAdopted kills, and reaps, the processes that came to dlock, their
// subreaper, when the guard was killed: the command (which its parent-death
// signal is ending too) and, as each dies, the processes it started, until
// none is left. dlock has no other children. It gives up on those not
// reaped within d (a process in uninterruptible sleep dies when it wakes).
func killAdopted(d time.Duration) {
	self := os.Getpid()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		kids := childrenOf(self, false)
		if len(kids) == 0 {
			return
		}
		for _, p := range kids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		// Once a process is reaped, its children are dlock's: the next
		// round finds them.
		for _, p := range kids {
			for time.Now().Before(deadline) {
				var ws syscall.WaitStatus
				if got, err := syscall.Wait4(p, &ws, syscall.WNOHANG, nil); got == p || err != nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
}

// stopByte asks the guard to stop the command for a lost lease: SIGTERM,
// and SIGKILL to whatever the command leaves behind once it exits (see
// runGuard). Signals are below it.
const stopByte = 0xff

// killed reports whether the process of ps ended by a signal.
func killed(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// startFailure is the guard's report that the command could not be
// started: its message, and its errno (which startError looks at).
type startFailure struct {
	msg   string
	errno syscall.Errno
}

func (e *startFailure) Error() string { return e.msg }
func (e *startFailure) Unwrap() error {
	if e.errno == 0 {
		return nil
	}
	return e.errno
}

// parseStartFailure reads an "err ERRNO MESSAGE" report.
func parseStartFailure(report string) (*startFailure, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSuffix(report, "\n"), "err ")
	if !ok {
		return nil, false
	}
	n, quoted, ok := strings.Cut(rest, " ")
	errno, err := strconv.Atoi(n)
	if !ok || err != nil {
		return nil, false
	}
	msg, err := strconv.Unquote(quoted)
	if err != nil {
		return nil, false
	}
	return &startFailure{msg: msg, errno: syscall.Errno(errno)}, true
}

// runGuard is the guard: it starts the command at path with argv (and its
// own environment, which dlock made the command's) and returns the
// command's exit status, or kills the command's group and returns when
// dlock dies.
func runGuard(group bool, path string, argv []string) int {
	link := os.NewFile(3, "dlock-link")
	syscall.CloseOnExec(3) // not the command's
	// Signals sent to dlock's process group (Ctrl-C, a kill of the job)
	// reach the guard too: dlock forwards them, and the guard must not die
	// of them and leave the group unguarded. Caught, not ignored: the
	// command gets the default dispositions, not an ignored SIGINT.
	signal.Notify(make(chan os.Signal, 1), forwardedSignals...)
	// The command also gets SIGKILL if the guard itself is killed. Linux's
	// parent-death signal fires when the thread that started the child
	// ends, so this one stays locked to this goroutine until the guard
	// exits.
	runtime.LockOSThread()
	if !group {
		// Orphans of the command's children come to the guard rather
		// than to init, so proctree.Signal still finds them.
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        argv,
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: group},
	}
	if err := cmd.Start(); err != nil {
		var errno syscall.Errno
		errors.As(err, &errno)
		fmt.Fprintf(link, "err %d %s\n", int(errno), strconv.Quote(err.Error()))
		return exitFailed
	}
	// A stopped process keeps a signal other than SIGKILL pending until it
	// is continued: so each is followed by SIGCONT, as timeout(1) and
	// systemd do (a command stopped by SIGSTOP or a terminal's stop kept
	// `timeout dlock run` alive, holding the lock, for good).
	signalCommand := func(sig syscall.Signal) {
		cont := sig != syscall.SIGKILL && sig != syscall.SIGCONT
		if group {
			_ = syscall.Kill(-cmd.Process.Pid, sig) // the group's id is the command's pid
			if cont {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
			}
			return
		}
		defer func() {
			if cont {
				_ = cmd.Process.Signal(syscall.SIGCONT)
			}
		}()
		// Sharing dlock's group (and terminal), the command has no group
		// of its own. A signal goes to the command alone, which passes it
		// on as it would a terminal's (a wrapper such as timeout relays
		// it: sent to its child too, the child would get it twice); only
		// SIGKILL, which nothing relays, goes to every process below the
		// guard: the command's children and, the guard being their
		// subreaper, the orphans they left.
		_ = cmd.Process.Signal(sig)
		if sig == syscall.SIGKILL {
			proctree.Signal(os.Getpid(), sig)
		}
	}
	// killRest kills what the command left behind (its group, or the
	// processes below the guard) once it exited after a stop: its children
	// that outlived the SIGTERM would run on without the lock, and the
	// guard would not be there to send them the SIGKILL after --grace.
	killRest := func() {
		if group {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			return
		}
		proctree.Signal(os.Getpid(), syscall.SIGKILL)
	}
	// If dlock is already gone this write fails, and the read below says so.
	fmt.Fprintf(link, "ok %d\n", cmd.Process.Pid)

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if !group {
		// As their subreaper the guard reaps the orphans it adopts: they
		// would stay zombies until the command ends.
		go reapOrphans(cmd.Process.Pid)
	}
	sigs := make(chan syscall.Signal)
	dlockGone := make(chan struct{})
	go func() {
		b := make([]byte, 1)
		for {
			if _, err := link.Read(b); err != nil {
				close(dlockGone) // EOF: dlock's end is closed, dlock is dead
				return
			}
			sigs <- syscall.Signal(b[0])
		}
	}()
	stopping := false
	for {
		select {
		case sig := <-sigs:
			if sig == stopByte {
				stopping = true
				sig = syscall.SIGTERM
			}
			signalCommand(sig)
		case <-dlockGone:
			signalCommand(syscall.SIGKILL)
			return 128 + int(syscall.SIGKILL)
		case err := <-exited:
			if stopping {
				killRest()
			}
			return exitCode(err)
		}
	}
}

// reapOrphans reaps, at each SIGCHLD, the guard's children other than the
// command (cmdPid, which cmd.Wait reaps) that have exited: the orphans it
// adopted as their subreaper.
func reapOrphans(cmdPid int) {
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	self := os.Getpid()
	for range chld {
		for _, p := range childrenOf(self, true) {
			if p != cmdPid {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(p, &ws, syscall.WNOHANG, nil)
			}
		}
	}
}

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// childrenOf lists pid's children, or only those that have exited.
func childrenOf(pid int, exitedOnly bool) []int {
	children, zombie := proctree.Read()
	var out []int
	for _, c := range children[pid] {
		if !exitedOnly || zombie[c] {
			out = append(out, c)
		}
	}
	return out
}

// childSysProcAttr is the demo's for its instances: the kernel sends an
// instance SIGKILL when the thread that started it exits. The child gets
// its own process group unless dlock's stdin is a terminal: then it stays
// in dlock's group, where the terminal's job control (Ctrl-C, Ctrl-Z,
// reading the terminal) works as for any foreground command.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Pdeathsig: syscall.SIGKILL,
		Setpgid:   !isTerminal(os.Stdin),
	}
}

// isTerminal reports whether f is a terminal (not merely a character
// device such as /dev/null).
func isTerminal(f *os.File) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}

// terminalSent reports whether sig is one a terminal sends to its whole
// foreground process group (Ctrl-C, Ctrl-\) and dlock's group is that
// group: the command, which shares it, then got sig from the terminal
// already, and forwarding it would deliver it twice (a second Ctrl-C means
// "exit at once" to many tools).
func terminalSent(sig syscall.Signal) bool {
	if sig != syscall.SIGINT && sig != syscall.SIGQUIT {
		return false
	}
	var fg int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, os.Stdin.Fd(), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&fg)))
	return errno == 0 && int(fg) == syscall.Getpgrp()
}

// terminalSize returns f's terminal's columns and rows, or zeros if f is
// not a terminal.
func terminalSize(f *os.File) (cols, rows int) {
	var ws struct{ Row, Col, X, Y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws)))
	if errno != 0 {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}
