package drivertest

import (
	"os"
	"strings"
	"testing"
)

// DocLines returns the lines of file (a source file of the package under
// test, read from the test's directory) that the package doc sets as code
// ("//" and a tab) and that start with prefix, without the marker: the
// commands the doc tells users to run (a grant, say), so that a test runs
// exactly those. With a section, only the lines after the doc's heading
// "# section" count. It fails the test when there is none.
func DocLines(t *testing.T, file, section, prefix string) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	if section != "" {
		_, text, _ = strings.Cut(text, "// # "+section+"\n")
	}
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if l, ok := strings.CutPrefix(l, "//\t"); ok && strings.HasPrefix(l, prefix) {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s: no %q lines in the package doc", file, prefix)
	}
	return lines
}
