package tlsurl

import (
	"context"
	"net/url"
	"strings"
	"testing"
)

// ca=/dev/zero read without end and exhausted memory.
func TestFilesAreBounded(t *testing.T) {
	q, _ := url.ParseQuery("ca=/dev/zero")
	if _, err := Config(context.Background(), q); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("Config(ca=/dev/zero) = %v; want an error saying the file is too large", err)
	}
}
