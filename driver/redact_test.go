package driver_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/dlock/dlock/driver"
)

func TestRedacted(t *testing.T) {
	u, err := driver.ParseURL("etcds://u:pw0rd@h1:2379,h2:2379/p?ca=/etc/ca.pem&cert=/etc/c.pem&key=/etc/sec/k.pem&sslpassword=kpass")
	if err != nil {
		t.Fatal(err)
	}
	got := driver.Redacted(u)
	for _, s := range []string{"pw0rd", "/etc/sec/k.pem", "%2Fetc%2Fsec%2Fk.pem", "kpass"} {
		if strings.Contains(got, s) {
			t.Errorf("Redacted = %q shows %q", got, s)
		}
	}
	if !strings.Contains(got, "h1:2379,h2:2379") || !strings.Contains(got, "ca.pem") {
		t.Errorf("Redacted = %q; want the hosts and the CA file kept", got)
	}
	text := driver.RedactText("open /etc/sec/k.pem (%2Fetc%2Fsec%2Fk.pem) as u:pw0rd", u)
	if strings.Contains(text, "k.pem") || strings.Contains(text, "pw0rd") {
		t.Errorf("RedactText = %q", text)
	}
}

// RedactError hides a URL's secrets from an error's text and keeps its
// cause for errors.Is; an error that shows none is returned as it is.
func TestRedactError(t *testing.T) {
	u, err := url.Parse("redis://:Zq7Wv3Kp9XjQ@127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	cause := fmt.Errorf("auth Zq7Wv3Kp9XjQ: %w", context.Canceled)
	got := driver.RedactError(cause, u)
	if strings.Contains(got.Error(), "Zq7W") || !errors.Is(got, context.Canceled) {
		t.Errorf("RedactError = %v (errors.Is canceled: %v)", got, errors.Is(got, context.Canceled))
	}
	if plain := errors.New("refused"); driver.RedactError(plain, u) != plain || driver.RedactError(nil, u) != nil {
		t.Error("RedactError changed an error without secrets, or a nil one")
	}
}
