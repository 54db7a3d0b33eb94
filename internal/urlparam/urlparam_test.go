package urlparam

import (
	"net/url"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	ints := map[string]Int{"pool_size": Pool, "retries": Between(-1, 10)}
	for _, tc := range []struct{ query, want string }{
		{"pool_size=0", ""},
		{"pool_size=10000", ""},
		{"retries=-1", ""},
		{"other=-5", ""},
		{"pool_size=-1", "pool_size=-1: want 0 to 10000"},
		{"pool_size=100000000", "pool_size=100000000: want 0 to 10000"},
		{"pool_size=99999999999999999999", "pool_size: want an integer"},
		{"pool_size=x", "pool_size: want an integer"},
		{"pool_size=", "pool_size: want an integer"},
		{"retries=11", "retries=11: want -1 to 10"},
		{"pool_size=1&pool_size=-1", "pool_size=-1"},
	} {
		q, _ := url.ParseQuery(tc.query)
		err := Check(q, ints)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Check(%s) = %v; want nil", tc.query, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Check(%s) = %v; want an error saying %q", tc.query, err, tc.want)
		}
	}
}
