package main_test

import (
	"strings"
	"testing"
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
