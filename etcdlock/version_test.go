package etcdlock

import "testing"

// TestLeaksLeaseKeys: the versions before the fix of CVE-2023-32082 (3.4.26,
// 3.5.9) leak; later ones, and versions it cannot read, do not.
func TestLeaksLeaseKeys(t *testing.T) {
	for v, want := range map[string]bool{
		"3.4.23": true, "3.4.25": true, "3.4.26": false, "3.4.30": false, "3.3.27": true, "2.3.8": true,
		"3.5.0": true, "3.5.8": true, "3.5.9": false, "3.5.17": false, "3.6.0": false, "v3.5.2": true,
		"3.5.0-rc.1": true, "4.0.0": false, "": false, "garbage": false,
	} {
		if got := leaksLeaseKeys(v); got != want {
			t.Errorf("leaksLeaseKeys(%q) = %v; want %v", v, got, want)
		}
	}
}
