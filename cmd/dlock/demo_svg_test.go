package main_test

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"strings"
	"testing"
)

// checkLatencySVG checks that path is well-formed SVG with a panel for
// each mode.
func checkLatencySVG(t *testing.T, path string, modes []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	var texts []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed: %v", path, err)
		}
		if c, ok := tok.(xml.CharData); ok {
			texts = append(texts, string(c))
		}
	}
	all := strings.Join(texts, "\n")
	for _, m := range modes {
		if !strings.Contains(all, m+" · p50") {
			t.Errorf("no panel for mode %s in %s", m, path)
		}
	}
}
