package urlsecret

import (
	"net/url"
	"strings"
	"testing"
)

func TestSecrets(t *testing.T) {
	for raw, want := range map[string]bool{
		"redis://u:pw@h:1": true,
		"redis://:pw@h:1":  true,
		"redis+sentinel://h:1/m?sentinel_password=pw":   true,
		"postgres://u@h/db?password=pw":                 true,
		"redis://u@h:1?password_file=/run/secrets/pass": false,
		"redis://h:1":       false,
		"redis://u:pw@[::1": true,
	} {
		if got := HasSecret(raw); got != want {
			t.Errorf("HasSecret(%s) = %v", raw, got)
		}
	}
	u, err := url.Parse("redis+sentinel://u:pw1@h:1/m?sentinel_password=pw2&db=0")
	if err != nil {
		t.Fatal(err)
	}
	s := Redact(u)
	if strings.Contains(s, "pw1") || strings.Contains(s, "pw2") || !strings.Contains(s, "db=0") {
		t.Errorf("Redacted = %s", s)
	}
	if got := strings.Join(Secrets(u), " "); !strings.Contains(got, "pw1") || !strings.Contains(got, "pw2") {
		t.Errorf("Secrets = %q; want both passwords", got)
	}
}
