package tlsurl

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigErrorsNameTheParameterNotThePath(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "s3cret-junk.pem")
	if err := os.WriteFile(junk, []byte("no PEM here"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ query, want string }{
		{"ca=" + junk, "ca:"},
		{"ca=/nonexistent/s3cret.pem", "ca:"},
		{"cert=" + junk, "cert and key go together"},
		{"cert=" + junk + "&key=/nonexistent/s3cret-key.pem", "key:"},
		{"cert=" + junk + "&key=" + junk, "cert/key:"},
		{"insecure_skip_verify=yes please", "insecure_skip_verify"},
	} {
		q, _ := url.ParseQuery(tc.query)
		_, err := Config(context.Background(), q)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Config(%s) = %v; want an error saying %q without the path", tc.query, err, tc.want)
		}
	}
	q, _ := url.ParseQuery("insecure_skip_verify=true&other=1")
	c, err := Config(context.Background(), q)
	if err != nil || !c.InsecureSkipVerify || c.RootCAs != nil {
		t.Errorf("Config(insecure_skip_verify=true) = %+v, %v", c, err)
	}
	if !Has(q) {
		t.Error("Has = false")
	}
	Del(q)
	if Has(q) || q.Get("other") != "1" {
		t.Errorf("after Del: %v", q)
	}
}
