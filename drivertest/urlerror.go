package drivertest

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlock/dlock"
)

// WantInvalidURL wants dlock.Open(u) to fail with dlock.ErrInvalidURL and
// an error that says each of want and does not contain hidden (a secret
// the URL holds, such as a key file's path; none if empty).
func WantInvalidURL(t *testing.T, u, hidden string, want ...string) {
	t.Helper()
	_, err := openURL(t, u)
	t.Log(err)
	if !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("Open: %v; want ErrInvalidURL", err)
		return
	}
	if hidden != "" && strings.Contains(err.Error(), hidden) {
		t.Errorf("Open: %v; want an error that does not show %q", err, hidden)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open: %v; want it to say %q", err, w)
		}
	}
}
