package main

import (
	"context"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/urlsecret"
)

// Which backends `dlock demo --backend all` runs on: the candidates, and
// why one is skipped.

// demoCandidates are the backends --backend all tries besides the embedded
// etcd: DLOCK_URL, DLOCK_DEMO_BACKENDS and --also, without repeats.
func demoCandidates(also []string) []string {
	var out []string
	add := func(u string) {
		if u != "" && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	add(os.Getenv("DLOCK_URL"))
	for _, u := range strings.Fields(os.Getenv("DLOCK_DEMO_BACKENDS")) {
		add(u)
	}
	for _, u := range also {
		add(u)
	}
	return out
}

// demoRefuses says why the demo cannot use a backend, or "".
func demoRefuses(u *url.URL) string {
	if u.Scheme == "mem" {
		return "mem:// keeps its locks inside one process, and each app instance is a process of its own with its own mem store: its locks would exclude nothing (use the default embedded etcd, or a real store)"
	}
	return ""
}

// demoReachable opens a candidate backend within --connect-timeout; it
// returns the label to show and, if the demo cannot use it, why.
func demoReachable(ctx context.Context, rawURL string) (label, reason string) {
	u, err := parseWithin(ctx, rawURL)
	if err != nil {
		return "(unparsable URL)", strings.TrimPrefix(err.Error(), "dlock: ")
	}
	// Redacted whenever it hides anything, not only with a password: it
	// also hides what HasSecret leaves out, key file paths and acl digest
	// hashes (a re-test pass). Else the URL as written ("mem://", which
	// Redacted spells "mem:").
	label = rawURL
	if red := driver.Redacted(u); urlsecret.HasSecret(rawURL) || strings.Contains(red, "xxxxx") {
		label = red
	}
	if r := demoRefuses(u); r != "" {
		return label, r
	}
	c, err := openBackend(ctx, rawURL)
	if err != nil {
		return label, strings.TrimPrefix(oneLine(err.Error()), "dlock: ")
	}
	_ = c.Close()
	return label, ""
}
