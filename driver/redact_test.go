package driver_test

import (
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
