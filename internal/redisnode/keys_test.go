package redisnode

import "testing"

// TestKeysLayout pins the mutex's key names: NewKeys cuts them from one
// string, and a slip in its offsets would move a lock to other keys, which
// clients of another version would not see.
func TestKeysLayout(t *testing.T) {
	for _, name := range []string{"a", "", "orders/42", "{x}", "50%", "ünï"} {
		k := NewKeys("dl", name)
		base := "dl:{" + tagEscaper.Replace(name) + "}"
		want := map[string]string{"lock": base, "token": base + ":token", "queue": base + ":queue",
			"info": base + ":queueinfo", "chann": base + ":released"}
		got := map[string]string{"lock": k.lock, "token": k.token, "queue": k.queue, "info": k.info, "chann": k.chann}
		for f, w := range want {
			if got[f] != w {
				t.Errorf("NewKeys(%q).%s = %q, want %q", name, f, got[f], w)
			}
		}
		if l := k.all(); len(l) != 4 || l[0] != base || l[1] != want["token"] || l[2] != want["queue"] || l[3] != want["info"] {
			t.Errorf("NewKeys(%q).all() = %q", name, l)
		}
	}
}
