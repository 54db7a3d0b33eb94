package sqltest

import (
	"os"
	"strings"
	"testing"

	"github.com/dlock/dlock"
)

// GrantTenant runs the "Least privilege" block of the package doc in file
// (the backend's package file) for a tenant of its own: each SQL line,
// rewritten by r, through exec (as a user who may grant); where the block
// says the owner migrates (a "--" comment line), it opens ownerURL and
// migrates, as `dlock migrate` does.
func GrantTenant(t *testing.T, file string, r *strings.Replacer, exec func(stmt string), ownerURL string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(src), "// # Least privilege\n")
	var lines []string
	for _, l := range strings.Split(sec, "\n") {
		if l, ok := strings.CutPrefix(l, "//\t"); ok {
			lines = append(lines, r.Replace(l))
		}
	}
	if len(lines) == 0 {
		t.Fatal("no grant block in the package doc")
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "--") {
			exec(l)
			continue
		}
		c, err := dlock.Open(t.Context(), ownerURL)
		if err != nil {
			t.Fatalf("Open as the owner: %v", err)
		}
		err = c.Migrate(t.Context())
		_ = c.Close()
		if err != nil {
			t.Fatalf("Migrate as the owner: %v", err)
		}
	}
}
