// Package testserver starts private instances of real servers for tests: each
// on a free loopback port, with its data in a temp dir, stopped at cleanup.
//
// When a server's binary is missing the test is skipped with the binary's
// name, unless DLOCK_REQUIRE_SERVERS=1 (set by CI), which fails it instead.
package testserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/dlock/dlock/internal/proctree"
	"github.com/dlock/dlock/internal/syncbuf"
)

// TB is what the servers need from a test (testing.TB has it) or from a
// program such as the benchmark tool.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// RequireEnv is the environment variable that turns a missing server binary
// from a skip into a failure.
const RequireEnv = "DLOCK_REQUIRE_SERVERS"

// Server is a running server process.
type Server struct {
	Name string // e.g. "redis-server"
	Host string // always a loopback address
	Port int
	Dir  string // its data dir

	bin   string
	args  func(port int, dir string) []string
	ready func(ctx context.Context, addr string) error
	cred  *syscall.Credential // run as this user (servers that refuse root)

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{}
	log  *syncbuf.Buffer // the process's output, which exec's copier writes as Log reads
}

// Addr returns host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// LookBinary finds a server binary on PATH or in extra directories (Debian
// keeps some, like PostgreSQL's, outside PATH). When it is missing it skips t,
// or fails it if RequireEnv is set.
func LookBinary(t TB, name string, extra ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, pattern := range extra {
		if m, _ := filepath.Glob(filepath.Join(pattern, name)); len(m) > 0 {
			return m[len(m)-1]
		}
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s not found and %s=1: run scripts/install-deps.sh", name, RequireEnv)
	}
	t.Skipf("%s not found: run scripts/install-deps.sh (or make test), which installs it", name)
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ClosedAddr returns a loopback address (host:port) that nothing listened
// on a moment ago: a dial of it is refused.
func ClosedAddr(t TB) string {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// SilentAddr returns a loopback address that accepts connections and never
// answers on them (a server that hangs), until t ends.
func SilentAddr(t TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				break
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// start launches the server on a fresh port, retrying if the port was taken
// meanwhile, and registers its stop with t.
func (s *Server) start(t TB) {
	t.Helper()
	if s.Dir == "" {
		s.Dir = t.TempDir()
	}
	s.Host = "127.0.0.1"
	var err error
	for range 3 {
		if s.Port, err = FreePort(); err != nil {
			continue
		}
		if err = s.Start(); err == nil {
			t.Cleanup(s.Stop)
			return
		}
	}
	t.Fatalf("start %s: %v", s.Name, err)
}

// Start (re)starts the stopped server on its port and data dir, and waits
// until it is ready.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("%s already running", s.Name)
	}
	s.log = &syncbuf.Buffer{}
	cmd := exec.Command(s.bin, s.args(s.Port, s.Dir)...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	if err := cmd.Start(); err != nil {
		return err
	}
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err := s.ready(ctx, s.Addr())
		if err == nil {
			s.cmd, s.exit = cmd, exit
			return nil
		}
		select {
		case <-exit:
			return fmt.Errorf("%s exited: %s", s.Name, tail(s.log.String()))
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exit
			return fmt.Errorf("%s not ready: %v: %s", s.Name, err, tail(s.log.String()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10s) and waits for it.
func (s *Server) Stop() { s.signalStop(syscall.SIGTERM) }

// Kill kills the server at once, as a crash would.
func (s *Server) Kill() { s.signalStop(syscall.SIGKILL) }

func (s *Server) signalStop(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	signalTree(pid, syscall.SIGCONT) // a paused server cannot stop
	if sig == syscall.SIGKILL {
		signalTree(pid, sig) // a crash takes the whole server down at once
	} else {
		_ = syscall.Kill(-pid, sig)
	}
	select {
	case <-s.exit:
	case <-time.After(10 * time.Second):
		signalTree(pid, syscall.SIGKILL)
		<-s.exit
	}
	s.cmd = nil
}

// Pid is the server's process id (0 while it is stopped); its children, if
// it has any, are below it in the process tree.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Pause freezes the server (SIGSTOP), as a long GC pause or a VM stall would.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume undoes Pause.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		signalTree(s.cmd.Process.Pid, sig)
	}
}

// signalTree sends sig to the process group pid leads and to every
// descendant of pid: some servers' children leave the group (PostgreSQL's
// backends call setsid), and a pause that missed them would test less than
// it says.
func signalTree(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
	proctree.Signal(pid, sig)
}

// Log returns what the server printed.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

func tail(s string) string {
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}
