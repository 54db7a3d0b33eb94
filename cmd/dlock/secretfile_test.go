package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// --backend-file and password_file= read a bounded amount (a wrong path
// such as /dev/zero exhausted memory), and a file holding a password that
// every local user can read draws a warning (the README asks for 0600).
func TestSecretFiles(t *testing.T) {
	for _, args := range [][]string{
		{"--backend-file", "/dev/zero"},
		{"--backend", "redis://app@127.0.0.1:1?password_file=/dev/zero"},
	} {
		r := dlockCmd(t, nil, append([]string{"inspect", "job"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "more than") {
			t.Errorf("dlock inspect %v: exit %d, %q; want exit 2 saying the file is too large", args, r.code, r.stderr)
		}
	}
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	urlFile := filepath.Join(dir, "url")
	plainFile := filepath.Join(dir, "plain")
	for p, s := range map[string]string{pwFile: "pw\n", urlFile: "redis://:s3cret@127.0.0.1:1\n", plainFile: "redis://127.0.0.1:1\n"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		env  []string
		args []string
		warn string
	}{
		{nil, []string{"--backend-file", urlFile}, "--backend-file " + urlFile + " holds a password"},
		{nil, []string{"--backend-file", plainFile}, ""},
		{[]string{"DLOCK_URL=redis://127.0.0.1:1?password_file=" + pwFile}, nil, "password_file " + pwFile},
		{nil, []string{"--backend", "redis://127.0.0.1:1?password_file=" + pwFile}, "password_file " + pwFile},
	} {
		r := dlockCmd(t, tc.env, append([]string{"inspect", "--connect-timeout", "1s", "job"}, tc.args...)...)
		warned := strings.Contains(r.stderr, "chmod 600")
		if warned != (tc.warn != "") || tc.warn != "" && !strings.Contains(r.stderr, tc.warn) || strings.Contains(r.stderr, "s3cret") {
			t.Errorf("dlock %v %v: stderr %q; want a warning %q", tc.env, tc.args, r.stderr, tc.warn)
		}
	}
	if err := os.Chmod(urlFile, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := dlockCmd(t, nil, "inspect", "--connect-timeout", "1s", "job", "--backend-file", urlFile); strings.Contains(r.stderr, "chmod 600") {
		t.Errorf("a 0600 file: stderr %q; want no warning", r.stderr)
	}
}

// A NATS token on the command line draws the warning with the parameter
// NATS takes from a file, token_file= (it suggested password_file=).
func TestArgvTokenWarning(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"nats://S3CRETTOKEN@127.0.0.1:1/b", "holds a token, which every local user can read in the process list; use DLOCK_URL, --backend-file PATH or token_file=PATH"},
		{"redis://:S3CRETTOKEN@127.0.0.1:1", "holds a password, which every local user can read in the process list; use DLOCK_URL, --backend-file PATH or password_file=PATH"},
	} {
		r := dlockCmd(t, nil, "inspect", "--connect-timeout", "1s", "job", "--backend", tc.url)
		if !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stdout+r.stderr, "S3CRETTOKEN") {
			t.Errorf("dlock inspect --backend %s: stderr %q; want %q and no token", tc.url, r.stderr, tc.want)
		}
	}
}

// A silent pipe named by --backend-file or password_file= ends the command
// at --connect-timeout: the error message's second reading of the URL
// waited on it without a bound.
func TestSilentPipeEndsAtConnectTimeout(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // a writer that never writes
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, args := range [][]string{
		{"--backend", "redis://127.0.0.1:1?password_file=" + fifo},
		{"--backend-file", fifo},
	} {
		r := dlockCmd(t, nil, append([]string{"inspect", "--connect-timeout", "1s", "job"}, args...)...)
		if r.code != 2 {
			t.Errorf("dlock inspect %v: exit %d, %q; want exit 2", args, r.code, r.stderr)
		}
	}
}
