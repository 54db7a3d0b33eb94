package natslock

import "testing"

func TestVersionAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"2.11.0": true, "2.10.24": false, "v2.15.2": true, "3.0.0": true,
		"1.99.0": false, "": false, "2": false, "2.x.1": false} {
		if got := versionAtLeast(v, 2, 11); got != want {
			t.Errorf("versionAtLeast(%q) = %v", v, got)
		}
	}
}
