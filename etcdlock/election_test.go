package etcdlock_test

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// etcdctlProc is a running etcdctl whose output lines arrive on lines.
type etcdctlProc struct {
	cmd   *exec.Cmd
	lines chan string
}

func startEtcdctl(t *testing.T, ep string, args ...string) *etcdctlProc {
	t.Helper()
	etcdctl := testserver.LookBinary(t, "etcdctl")
	cmd := exec.Command(etcdctl, append([]string{"--endpoints=" + ep}, args...)...)
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &etcdctlProc{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

// next returns the next line etcdctl prints, failing after d.
func (p *etcdctlProc) next(t *testing.T, d time.Duration, what string) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("%s: etcdctl exited", what)
		}
		return l
	case <-time.After(d):
		t.Fatalf("%s: etcdctl printed nothing in %v", what, d)
		return ""
	}
}

// silent asserts that etcdctl prints nothing for d.
func (p *etcdctlProc) silent(t *testing.T, d time.Duration, what string) {
	t.Helper()
	select {
	case l := <-p.lines:
		t.Fatalf("%s: etcdctl printed %q", what, l)
	case <-time.After(d):
	}
}

// interrupt stops etcdctl as Ctrl-C would: `etcdctl elect` then resigns.
func (p *etcdctlProc) interrupt(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		for range p.lines {
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("etcdctl did not exit on SIGINT")
	}
}

// dlock and `etcdctl elect` candidates elect one leader, both ways, and
// `etcdctl elect -l` observes dlock's leaders and their Proclaims.
func TestEtcdctlElectInterop(t *testing.T) {
	srv := testserver.Etcd(t)
	ep := srv.Addr()
	c := open(t, "http://"+ep)
	ctx := t.Context()
	e := c.Election("interop-elect", dlock.WithTTL(5*time.Second))

	obs := startEtcdctl(t, ep, "elect", "-l", "interop-elect")

	// etcdctl leads: dlock reads its value and waits behind it.
	ctl := startEtcdctl(t, ep, "elect", "interop-elect", "etcdctl-proposal")
	key := ctl.next(t, 10*time.Second, "etcdctl elect")
	if !strings.HasPrefix(key, "interop-elect/") {
		t.Fatalf("etcdctl elect printed key %q", key)
	}
	if v := ctl.next(t, 5*time.Second, "etcdctl elect value"); v != "etcdctl-proposal" {
		t.Fatalf("etcdctl elect printed value %q", v)
	}
	ld, err := e.Leader(ctx)
	if err != nil || ld.Value != "etcdctl-proposal" {
		t.Fatalf("Leader while etcdctl leads = %+v, %v; want etcdctl's proposal", ld, err)
	}
	if k, v := obs.next(t, 10*time.Second, "elect -l"), obs.next(t, 5*time.Second, "elect -l"); k != key || v != "etcdctl-proposal" {
		t.Fatalf("etcdctl elect -l printed %q %q; want %q etcdctl-proposal", k, v, key)
	}
	campaign := drivertest.Go(func() (*dlock.Term, error) { return e.Campaign(ctx, "dlock-proposal") })
	campaign.WantPending(t, time.Second, "dlock's Campaign while etcdctl leads")
	ctl.interrupt(t) // etcdctl resigns
	term := campaign.Want(t, 10*time.Second, "dlock's Campaign after etcdctl resigned")
	if term.Token() <= ld.Term {
		t.Fatalf("dlock's term %d is not above etcdctl's %d", term.Token(), ld.Term)
	}
	_, v := obs.next(t, 10*time.Second, "elect -l"), obs.next(t, 5*time.Second, "elect -l")
	if v != "dlock-proposal" {
		t.Fatalf("etcdctl elect -l printed %q after dlock took the lead; want dlock-proposal", v)
	}
	if err := term.Proclaim(ctx, "dlock-proclaimed"); err != nil {
		t.Fatal(err)
	}
	if _, v := obs.next(t, 10*time.Second, "elect -l"), obs.next(t, 5*time.Second, "elect -l"); v != "dlock-proclaimed" {
		t.Fatalf("etcdctl elect -l printed %q after Proclaim; want dlock-proclaimed", v)
	}

	// dlock leads: etcdctl waits, and leads once dlock resigns.
	ctl2 := startEtcdctl(t, ep, "elect", "interop-elect", "etcdctl-2")
	ctl2.silent(t, time.Second, "etcdctl elect while dlock leads")
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	ctl2.next(t, 10*time.Second, "etcdctl elect after dlock resigned")
	if v := ctl2.next(t, 5*time.Second, "etcdctl elect value"); v != "etcdctl-2" {
		t.Fatalf("etcdctl elect printed %q", v)
	}
	ld2, err := e.Leader(ctx)
	if err != nil || ld2.Value != "etcdctl-2" || ld2.Term <= term.Token() {
		t.Fatalf("Leader after dlock resigned = %+v, %v; want etcdctl-2 in a later term than %d", ld2, err, term.Token())
	}
	ctl2.interrupt(t)
	if _, err := e.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader after everyone resigned: %v; want ErrNoLeader", err)
	}
}

// List shows an election as one while its term passes to the next
// candidate: it read the holder twice, and when the holder changed between
// the reads, showed the outgoing term as a plain mutex with no leader (an
// adversary pass: 6 of 6 handoffs).
func TestListElectionThroughHandoffs(t *testing.T) {
	srv := testserver.Etcd(t)
	a, b, op := open(t, "http://"+srv.Addr()), open(t, "http://"+srv.Addr()), open(t, "http://"+srv.Addr())
	ctx := t.Context()
	const name = "handoff-elect"
	term, err := a.Election(name).Campaign(ctx, "v0")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	seen := make(chan string, 1)
	poll := drivertest.Go(func() (int, error) {
		n := 0
		for {
			select {
			case <-stop:
				return n, nil
			default:
			}
			infos, err := op.List(ctx, name)
			if err != nil {
				return n, err
			}
			for _, i := range infos {
				if i.Name == name && i.Held && !i.Election {
					select {
					case seen <- i.Owner + " " + i.Label:
					default:
					}
				}
			}
			n++
		}
	})
	cands := []*dlock.Client{a, b} // a leads first: b, then a, …
	for round := 1; round <= 6; round++ {
		next := drivertest.Go(func() (*dlock.Term, error) { return cands[round%2].Election(name).Campaign(ctx, "v") })
		time.Sleep(50 * time.Millisecond) // queued behind the leader
		if err := term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		term = next.Want(t, 10*time.Second, "the next term")
	}
	close(stop)
	if n := poll.Want(t, 10*time.Second, "List"); n == 0 {
		t.Fatal("List never ran")
	}
	select {
	case s := <-seen:
		t.Errorf("List showed the election as a plain lock (owner, label %q)", s)
	default:
	}
}

// TestListElectionUnderChurn: three candidates pass the lead back and
// forth as fast as they can while an operator lists. Every List that finds
// the election held shows it as an election: the leader's value is judged
// from the read that found the leader (a re-test pass saw 10% of Lists at
// 500 terms/s show a plain mutex when it was read again).
func TestListElectionUnderChurn(t *testing.T) {
	srv := testserver.Etcd(t)
	op := open(t, "http://"+srv.Addr())
	ctx := t.Context()
	const name = "churn-elect"
	stop := make(chan struct{})
	var cands []*drivertest.Call[int]
	for range 3 {
		c := open(t, "http://"+srv.Addr())
		cands = append(cands, drivertest.Go(func() (int, error) {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return n, nil
				default:
				}
				term, err := c.Election(name).Campaign(ctx, "v")
				if err != nil {
					return n, err
				}
				if err := term.Resign(ctx); err != nil {
					return n, err
				}
			}
		}))
	}
	lists, held, plain := 0, 0, 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); lists++ {
		infos, err := op.List(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range infos {
			if i.Name == name && i.Held {
				held++
				if !i.Election {
					plain++
				}
			}
		}
	}
	close(stop)
	terms := 0
	for _, c := range cands {
		terms += c.Want(t, 10*time.Second, "a candidate")
	}
	if terms < 10 || held == 0 {
		t.Fatalf("%d terms, %d of %d Lists found a leader: too few to tell", terms, held, lists)
	}
	if plain > 0 {
		t.Errorf("%d of %d Lists that found a leader showed a plain mutex (%d terms)", plain, held, terms)
	}
}
