package main_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The demo's own store errors and its labels of skipped backends hide the
// URL's secrets (a re-test pass): go-redis's parse error of a host list
// quoted the URL whole, pgx masks password= alone, and a skipped
// backend's label was the URL as written unless it held a password, so an
// acl digest hash or a key file's path showed.
func TestDemoHidesSecrets(t *testing.T) {
	const pw = "Zq7Wv3Kp9XjQ"
	const hash = "Jj+2xl2LGkwP/8PWn1cWN4JQln8="
	for _, tc := range []struct {
		env    []string
		args   []string
		secret string
	}{
		{nil, []string{"--store", "redis://app:" + pw + "@127.0.0.1:1,[::1]:2"}, pw},
		{nil, []string{"--store", "redis://app:" + pw + "@[::1]:1,127.0.0.1:2"}, pw},
		{nil, []string{"--store", "postgres://app@127.0.0.1:1/db?sslmode=bogus&apikey=" + pw}, pw},
		{nil, []string{"--store", "postgres://app@127.0.0.1:1/db?sslmode=bogus&sslkey=/run/" + pw + ".key"}, pw},
		{[]string{"DLOCK_URL=zk://127.0.0.1:1/x?acl=digest:bob:" + hash + ":rwcda"}, []string{"--backend", "all", "--connect-timeout", "1s"}, hash},
		{[]string{"DLOCK_URL=rediss://127.0.0.1:1?key=/run/" + pw + ".pem&cert=/c.pem"}, []string{"--backend", "all", "--connect-timeout", "1s"}, pw},
	} {
		for _, out := range []string{"text", "json"} {
			args := append([]string{"demo", "-o", out, "--modes", "lock", "--requests", "5", "--stock", "5"}, tc.args...)
			r := dlockCmd(t, tc.env, args...)
			for _, piece := range []string{tc.secret, tc.secret[:8], tc.secret[len(tc.secret)-8:]} {
				if strings.Contains(r.stdout+r.stderr, piece) {
					t.Errorf("dlock %v %v shows %q: exit %d\nstdout %s\nstderr %s", tc.env, args, piece, r.code, r.stdout, r.stderr)
					break
				}
			}
			if tc.env != nil && !strings.Contains(r.stderr, "skipping") { // the case's point: the skipped label
				t.Errorf("dlock %v %v: no backend skipped: %s", tc.env, args, r.stderr)
			}
		}
	}
}

// The demo's stock store (a re-test pass): its first request is bounded by
// --connect-timeout (an etcd store that never answered hung the demo), a
// store reads the parameters it is given or refuses them (mysql's tls= and
// etcd's were dropped without a word), a --store that repeats a SQL
// --backend URL keeps working, a redis store reads password_file=, and the
// warning about a password on the command line gives --store advice it can
// follow.
func TestDemoStoreURL(t *testing.T) {
	demo := func(store string, extra ...string) result {
		return dlockCmd(t, nil, append([]string{"demo", "--modes", "lock", "--requests", "5", "--stock", "5", "--connect-timeout", "1s", "--store", store}, extra...)...)
	}
	start := time.Now()
	r := demo("etcd://127.0.0.1:1")
	if r.code != 2 || !strings.Contains(r.stderr, "store:") || time.Since(start) > time.Minute {
		t.Errorf("an etcd store that never answers: exit %d after %v, %q", r.code, time.Since(start), r.stderr)
	}
	for store, want := range map[string]string{
		"mysql://app@127.0.0.1:1/db?tls=bogus&mode=table": "reads no URL parameters (1 given)",
		"etcd://127.0.0.1:1?ca=/nonexistent":              "reads no URL parameters (1 given)",
	} {
		if r := demo(store); r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("--store %s: exit %d, %q; want %q", store, r.code, r.stderr, want)
		}
	}
	for _, store := range []string{"mysql://app@127.0.0.1:1/db?mode=table&max_held=4", "postgres://app@127.0.0.1:1/db?mode=session&sslmode=disable"} {
		if r := demo(store); r.code != 2 || !strings.Contains(r.stderr, "refused") {
			t.Errorf("--store %s (the backend's own parameters): exit %d, %q; want the connection refused", store, r.code, r.stderr)
		}
	}
	pwFile := t.TempDir() + "/pw"
	if err := os.WriteFile(pwFile, []byte("Zq7Wv3Kp9XjQ\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := demo("redis://127.0.0.1:1?password_file=" + pwFile); r.code != 2 || !strings.Contains(r.stderr, "store:") || strings.Contains(r.stderr, "unexpected option") || strings.Contains(r.stderr, "Zq7Wv3Kp9XjQ") {
		t.Errorf("a redis store with password_file=: exit %d, %q; want it read, and no answer", r.code, r.stderr)
	}
	r = demo("redis://:Zq7Wv3Kp9XjQ@127.0.0.1:1")
	if !strings.Contains(r.stderr, "the --store URL holds a password") || !strings.Contains(r.stderr, "use password_file=PATH in the URL") || strings.Contains(r.stderr, "DLOCK_URL") {
		t.Errorf("the --store warning: %q", r.stderr)
	}
	r = dlockCmd(t, nil, "inspect", "--connect-timeout", "1s", "--backend", "zk://127.0.0.1:1/x?acl=digest:ops:Jj%2B2xl2LGkwP%2F8PWn1cWN4JQln8%3D:r", "x")
	if !strings.Contains(r.stderr, "holds an acl digest hash") || !strings.Contains(r.stderr, "use DLOCK_URL or --backend-file PATH\n") {
		t.Errorf("an acl hash: %q", r.stderr)
	}
	// A store that takes the connection and never answers: go-redis's own
	// read timeout and retries no longer outlast --connect-timeout.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	if r := demo("redis://" + ln.Addr().String()); r.code != 2 || !strings.Contains(r.stderr, "within 1s (--connect-timeout)") {
		t.Errorf("a silent redis store: exit %d, %q", r.code, r.stderr)
	}
	const seed = "SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY"
	r = dlockCmd(t, nil, "inspect", "--connect-timeout", "1s", "--backend", "nats://127.0.0.1:1/b?nkeys="+seed, "x")
	if !strings.Contains(r.stderr, "holds an NKey seed") || !strings.Contains(r.stderr, "nkey=PATH") || strings.Contains(r.stdout+r.stderr, seed[:12]) {
		t.Errorf("an NKey seed under nkeys=: %q", r.stderr)
	}
}

// An interrupt while the demo's store is connecting says "interrupted"
// (exit 1), not a store error with the usage status (exit 2).
func TestDemoInterruptedWhileStoreConnects(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { // a store that takes the connection and never answers
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	cmd := exec.Command(bin, "demo", "--modes", "lock", "--requests", "5", "--stock", "5", "--connect-timeout", "1m",
		"--store", "postgres://app@"+ln.Addr().String()+"/db?sslmode=disable")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(time.Minute):
		t.Fatalf("the demo never connected to its store: %s", stderr.String())
	}
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the demo did not end after the interrupt: %s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %d, %q; want 1 and interrupted", code, stderr.String())
	}
}
