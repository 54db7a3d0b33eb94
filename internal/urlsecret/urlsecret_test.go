package urlsecret

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestSecrets(t *testing.T) {
	for raw, want := range map[string]bool{
		"redis://u:pw@h:1": true,
		"redis://:pw@h:1":  true,
		"redis+sentinel://h:1/m?sentinel_password=pw":   true,
		"postgres://u@h/db?password=pw":                 true,
		"redis://u@h:1?password_file=/run/secrets/pass": false,
		"redis://h:1":       false,
		"redis://u:pw@[::1": true,
	} {
		if got := HasSecret(raw); got != want {
			t.Errorf("HasSecret(%s) = %v", raw, got)
		}
	}
	u, err := url.Parse("redis+sentinel://u:pw1@h:1/m?sentinel_password=pw2&db=0")
	if err != nil {
		t.Fatal(err)
	}
	s := Redact(u)
	if strings.Contains(s, "pw1") || strings.Contains(s, "pw2") || !strings.Contains(s, "db=0") {
		t.Errorf("Redacted = %s", s)
	}
	if got := strings.Join(Secrets(u), " "); !strings.Contains(got, "pw1") || !strings.Contains(got, "pw2") {
		t.Errorf("Secrets = %q; want both passwords", got)
	}
}

// A secret is hidden wherever a text shows it, but not where it is only
// part of a longer word, where "xxxxx" would tell it (finding of an
// adversary pass: with the password "p", "tcp" became "tcxxxxx").
func TestRedactTextHidesValuesOnly(t *testing.T) {
	for _, c := range []struct{ raw, text, want string }{
		{"redis://app:refused@h:1", "dial tcp h:1: connect: connection refused", "dial tcp h:1: connect: connection xxxxx"},
		{"redis://app:p@h:1", "dial tcp: invalid port; independent", "dial tcp: invalid port; independent"},
		{"redis://app:refused@h:1", `parse "redis://app:refused@h:1": bad`, `parse "redis://app:xxxxx@h:1": bad`},
		{"redis://app:p@h:1", `parse "redis://app:p@h:1": bad; tcp`, `parse "redis://app:xxxxx@h:1": bad; tcp`},
		{"redis://app:s3cret@h:1", `auth "s3cret" refused`, `auth "xxxxx" refused`},
		{"redis://app:s3cret@h:1", "password=s3cret&x=1", "password=xxxxx&x=1"},
		{"redis://app:s3cret@h:1", "s3cret", "xxxxx"},
		{"redis://app:s3cret@h:1", "cannot load key with s3cret (k.pem)", "cannot load key with xxxxx (k.pem)"},
		{"redis://app:aa@h:1", "x:aaa@", "x:aaa@"},
		{"redis://app:a%2Fb@h:1", "app:a/b@h and a%2Fb@h", "app:xxxxx@h and xxxxx@h"},
		{"nats://T0KEN@h:1/b", "open nats://T0KEN@h:1/b: refused", "open nats://xxxxx@h:1/b: refused"},
	} {
		u, err := url.Parse(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := RedactText(c.text, u); got != c.want {
			t.Errorf("RedactText(%q) with %s = %q; want %q", c.text, c.raw, got, c.want)
		}
	}
}

// nats://TOKEN@host carries a token as its user name: it is a secret like
// a password (finding of an adversary pass: the CLI printed it).
func TestNATSTokenIsSecret(t *testing.T) {
	for raw, want := range map[string]bool{
		"nats://T0KEN@h:1/b":   true,
		"tls://T0KEN@h:1/b":    true,
		"nats://u:pw@h:1/b":    true,
		"nats://h:1/b":         false,
		"redis://user@h:1":     false,
		"postgres://user@h/db": false,
		// A file's path is no secret in argv (it drew a warning to use
		// password_file=).
		"nats://h:1/b?token_file=/run/t": false,
		"nats://h:1/b?token=T0KEN":       true,
		"nats://h:1/b?nkey_seed=SUAB":    true, // echoed by an "unknown parameter" error
	} {
		if got := HasSecret(raw); got != want {
			t.Errorf("HasSecret(%s) = %v; want %v", raw, got, want)
		}
	}
	u, _ := url.Parse("nats://T0KEN@h:1/b")
	if s := Redact(u); strings.Contains(s, "T0KEN") || s != "nats://xxxxx@h:1/b" {
		t.Errorf("Redact = %s", s)
	}
	u, _ = url.Parse("redis://user@h:1")
	if s := Redact(u); s != "redis://user@h:1" {
		t.Errorf("Redact = %s; want the user name kept", s)
	}
}

// TestACLDigestHashIsSecret: a ZooKeeper acl= digest entry names another
// identity's password hash, which a re-test pass found in Open's errors,
// written with '+' as the docs say (url.Values reads it as a space) or
// escaped. Redact and RedactText hide the hash, and keep the user and
// rights; text in a hash's place that is not one (a forgotten hash) stays.
func TestACLDigestHashIsSecret(t *testing.T) {
	const hash = "ihiyF+ffIGizE5PFKtT3ojYE/DA="
	for acl, h := range map[string]string{
		"digest:ops:" + hash + ":rdz":                                                         hash,
		"digest:ops:" + url.QueryEscape(hash) + ":rdz":                                        hash,
		"ip:127.0.0.1:r,digest:ops:" + hash + ":rdz":                                          hash,
		"digest%3Aops%3A" + url.PathEscape(hash) + "%3Ardz":                                   hash,
		"digest:ops:%20" + hash + ":rdz":                                                      hash,
		"%2Bdigest:ops:" + hash + ":rdz":                                                      hash,
		"digest:ops:" + hash[:27] + ":rdz":                                                    hash[:27], // cut short
		"world:anyone:r%3Bdigest:ops:" + hash + ":rdz":                                        hash,      // ';' for ','
		"digest:ops:%27" + hash + "%27:rdz":                                                   "'" + hash + "'",
		"ip:10.0.0.1:r,digest:u:GVUj7Pk6B21qt6iHmgJcRCZBnqg=:r%3Bdigest:ops:" + hash + ":rdz": hash,
	} {
		key := "acl"
		if strings.HasPrefix(acl, "ip:10.") {
			key = "ac%6C" // url.Values reads it as acl
		}
		u, err := url.Parse("zk://a:pw@h:2181/app?session_timeout=2s&" + key + "=" + acl + "&acl=digest:ops:rd")
		if err != nil {
			t.Fatal(err)
		}
		got := Redact(u)
		if strings.Contains(got, "ihiyF") || strings.Contains(got, "ffIGizE5") || strings.Contains(got, "GVUj7") || !strings.Contains(got, "xxxxx") ||
			!strings.Contains(got, "rdz") || !strings.Contains(got, "digest:ops:rd") {
			t.Errorf("Redact(acl=%s) = %s; want the digest hash alone hidden", acl, got)
		}
		text := RedactText(`acl entry "digest:ops:`+h+`:rdz": permissions are letters of crwda`, u)
		if strings.Contains(text, "ihiyF") || !strings.Contains(text, "digest:ops:xxxxx:rdz") {
			t.Errorf("RedactText(acl=%s) = %s; want the hash hidden", acl, text)
		}
	}
}

// TestMistypedACLHidesHash: a digest hash in a mistyped entry (perms and
// hash swapped, the scheme forgotten, another key, a '?' for '&', a '&'
// for '?') is hidden all the same (a re-test pass).
func TestMistypedACLHidesHash(t *testing.T) {
	const hash = "ihiyF+ffIGizE5PFKtT3ojYE/DA="
	for _, raw := range []string{"zk://h:1/c?acl=digest:ops:rd:" + hash, "zk://h:1/c?acl=ops:" + hash + ":rd",
		"zk://h:1/c?acl2=digest:ops:" + hash + ":rd", "zk://h:1/c?session_timeout=5s?acl=digest:ops:" + hash + ":rd",
		"zk://h:1/c&acl=digest:ops:" + hash + ":rd", "zk://h:1/c?acl=digest%20:ops:" + url.QueryEscape(hash) + ":rd"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		got := Redact(u)
		text := RedactText(`session_timeout "5s?acl=digest:ops:`+strings.ReplaceAll(hash, "+", " ")+`:rd"; acl entry "digest:ops:rd:`+hash+`"`, u)
		if strings.Contains(got, "ffIGizE5") || strings.Contains(text, "ffIGizE5") {
			t.Errorf("%s: Redact %s, RedactText %s; want the hash hidden", raw, got, text)
		}
	}
}

// TestSecretsHiddenHoweverSpelled: a secret is hidden however the URL or
// a backend quoting it spells it (a re-test pass found each of these
// shown): a hash with a character escaped (%3d, %2f, %52) in the query or
// the path; a hash glued to a word; text in a hash's place that Go's %q
// escapes; a parameter's password escaped in a backend's quote of the raw
// URL (pgx).
func TestSecretsHiddenHoweverSpelled(t *testing.T) {
	const hash = "QUJDREVGR0hJSktMTU5PUFFSU1R="
	for _, raw := range []string{
		"zk://127.0.0.1:1/?acl=ops:QUJDREVGR0hJSktMTU5PUFFSU1R%3d:rd",
		"zk://127.0.0.1:1/?x=QUJDREVGR0hJSktMTU5PUFFSU1R%3d",
		"zk://127.0.0.1:1/QUJDREVGR0hJSktMTU5PUFFSU1%52=",
		"zk://127.0.0.1:1/a/QUJDREVG+0hJSktMTU5%2fUFFSU1R=",
		"zk://127.0.0.1:1/a/QUJDREVG%2B0hJSktMTU5/UFFSU1R=",
		"zk://127.0.0.1:1/?acl=digest:ops:QUJDREVGR0hJSktMTU5PUFFSU1R%3D:rd",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := Redact(u); strings.Contains(got, "QUJDREVG") || strings.Contains(got, "SktMTU5") {
			t.Errorf("Redact(%s) = %s; want the hash hidden", raw, got)
		}
	}
	for _, c := range []struct{ raw, text string }{
		{"zk://h:1/?acl=world:anyone:r" + hash, `acl entry "world:anyone:r` + hash + `": permissions are letters of crwda`},
		{"zk://h:1/?session_timeout=1" + hash, `session_timeout "1` + hash + `"`},
		{"zk://h:1/?acl=digest:ops:Zq9Secret%22Xk7Tail:rd", `acl entry "digest:ops:Zq9Secret\"Xk7Tail:rd": a digest id is user:HASH`},
		{"zk://h:1/?acl=digest:ops:Zq9Secret%09Xk7Tail:rd", `acl entry "digest:ops:Zq9Secret\tXk7Tail:rd"`},
		{"zk://h:1/?acl=digest:ops:Zq9Secret%FFXk7Tail:rd", `acl entry "digest:ops:Zq9Secret\xffXk7Tail:rd"`},
		{"zk://h:1/?acl=digest:ops:Zq9Secret%E2%80%8BXk7Tail:rd", `acl entry "digest:ops:Zq9Secret\u200bXk7Tail:rd"`},
		{"postgres://app@h:1/db?sslmode=bogus&token=Zq9Secret%2dXk7Tail", "cannot parse `postgres://app@h:1/db?sslmode=bogus&token=Zq9Secret%2dXk7Tail`: failed"},
		{"postgres://app@h:1/db?Password=Zq9Secret%2DXk7Tail", "cannot parse `postgres://app@h:1/db?Password=Zq9Secret%2DXk7Tail`: failed"},
		{"postgres://app@h:1/db?secret=Zq9Secret%20Xk7Tail", "cannot parse `postgres://app@h:1/db?secret=Zq9Secret%20Xk7Tail`: failed; Zq9Secret+Xk7Tail"},
	} {
		u, err := url.Parse(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := RedactText(c.text, u); strings.Contains(got, "Zq9Secret") || strings.Contains(got, "Xk7Tail") || strings.Contains(got, "SktMTU5") {
			t.Errorf("RedactText(%q) with %s = %q; want the secret hidden", c.text, c.raw, got)
		}
	}
}

// TestHasSecretReadsEveryPair: a password in a pair url.Values drops (a
// ';' or a bad escape in it) or in an opaque URL is on the command line
// all the same, and draws the warning (a re-test pass).
func TestHasSecretReadsEveryPair(t *testing.T) {
	for _, raw := range []string{"redis://h:1?password=Zq9Secret%zz", "redis://h:1?password=Zq9Secret;x", "redis:app:Zq9Secret@h"} {
		if !HasSecret(raw) {
			t.Errorf("HasSecret(%s) = false", raw)
		}
	}
	for _, raw := range []string{"redis://h:1?pass=Zq9Secret", "redis://h:1?pwd=Zq9Secret", "redis://h:1?apikey=Zq9Secret"} {
		if !HasSecret(raw) {
			t.Errorf("HasSecret(%s) = false", raw)
		}
		u, _ := url.Parse(raw)
		if got := RedactText("redis: unexpected option: "+u.RawQuery, u); strings.Contains(got, "Zq9Secret") || strings.Contains(Redact(u), "Zq9Secret") {
			t.Errorf("%s: %s, %s; want the value hidden", raw, Redact(u), got)
		}
	}
	for _, raw := range []string{"redis://h:1?db=1;x=%zz", "redis:h:1", "postgres://h/db?passfile=/home/a/.pgpass"} {
		if HasSecret(raw) {
			t.Errorf("HasSecret(%s) = true", raw)
		}
	}
}

// TestSecretsHiddenSecondPass: what a second re-test pass found shown: a
// secret with a byte that is not UTF-8 (raw or escaped); the first token
// of a host list with a token per host; two secrets that overlap in the
// text; a secret ending in '%' (escaped %25, it left "25"); a password= in
// a URL that does not parse for another reason.
func TestSecretsHiddenSecondPass(t *testing.T) {
	for _, c := range []struct{ raw, text string }{
		{"postgres://app@h:1/db?x_token=%FFabcdefghijklmnopq", "cannot parse `postgres://app@h:1/db?x_token=%FFabcdefghijklmnopq`"},
		{"postgres://app@h:1/db?x_token=%FFabcdefghijklmnopq", "cannot parse `postgres://app@h:1/db?x_token=%ffabcdefghijklmnopq`"},
		{"postgres://app@h:1/db?x_token=%FFabcdefghijklmnopq", "bad value \xffabcdefghijklmnopq"},
		{"nats://tok1SECRETtok1@127.0.0.1:1,tok2SECRETtok2@127.0.0.1:2", "nats: authorization violation for tok1SECRETtok1"},
		{"redis://u:PREFIXSECRETabcdefghij@h:1?token=abcdefghijTAILSECRET0123", "PREFIXSECRETabcdefghijTAILSECRET0123"},
		{"postgres://app@h:1/db?api_key=abcdefghijklmnopq%25", "cannot parse `postgres://app@h:1/db?api_key=abcdefghijklmnopq%25`"},
	} {
		u, err := url.Parse(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"abcdefghijklmnopq", "tok1SECRET", "PREFIXSECRET", "TAILSECRET", "%25", "q25"} {
			if got := RedactText(c.text, u); strings.Contains(got, bad) {
				t.Errorf("RedactText(%q) with %s = %q; shows %q", c.text, c.raw, got, bad)
			}
		}
		if got := Redact(u); strings.Contains(got, "tok1SECRET") || strings.Contains(got, "PREFIXSECRET") {
			t.Errorf("Redact(%s) = %s", c.raw, got)
		}
	}
	for _, raw := range []string{"redis://h:1/%zz?password=hunter2", "redis://h:1/?password=hunter2#%zz", "redis://h :1/?password=hunter2",
		"nats://h:1/%zz?token=hunter2", "redis://h/?password=a\n"} {
		if !HasSecret(raw) {
			t.Errorf("HasSecret(%q) = false", raw)
		}
	}
	if HasSecret("redis://h :1/?passfile=/p") {
		t.Error("HasSecret with a passfile= only = true")
	}
}

// A third re-test pass: an NKey seed pasted in nkey='s place (it names a
// seed file) was shown whole in Open's error and the CLI's, and HasSecret
// counted neither it nor an acl digest hash, so the demo showed the URL as
// written and no warning was given.
func TestSeedsAndHashesAreSecrets(t *testing.T) {
	const seed = "SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY"
	const hash = "Jj+2xl2LGkwP/8PWn1cWN4JQln8="
	for raw, want := range map[string]bool{
		"nats://h:1/b?nkey=" + seed:                                 true,
		"nats://h:1/b?creds=" + seed:                                true,
		"nats://h:1/b?nkey=/run/secrets/app.nk":                     false, // a path: the seed stays in the file
		"nats://h:1/b?creds=/run/secrets/app.creds":                 false,
		"zk://h:1/x?acl=digest:bob:" + url.QueryEscape(hash) + ":r": true,
		"zk://h:1/x?acl=digest:bob:" + hash + ":rwcda":              true,
		"zk://h:1/x?acl=world:anyone:r":                             false,
		"zk://h:1/x%zz?acl=digest:bob:" + hash + ":r":               true, // does not parse
	} {
		if got := HasSecret(raw); got != want {
			t.Errorf("HasSecret(%s) = %v, want %v", raw, got, want)
		}
	}
	for _, raw := range []string{"nats://h:1/b?nkey=" + seed, "nats://h:1/b?creds=" + seed, "nats://h:1/b?nkey=/run/" + seed} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if s := Redact(u); strings.Contains(s, seed[:8]) {
			t.Errorf("Redact(%s) = %s", raw, s)
		}
		v := u.Query().Get("nkey") + u.Query().Get("creds")
		if s := RedactText(`natslock: nkey `+v+`: open `+v+`: no such file`, u); strings.Contains(s, seed[:8]) {
			t.Errorf("RedactText with %s = %s", raw, s)
		}
	}
}

// A second re-test pass: a seed under a near-miss name (nkeys=, nkey_file=,
// user_creds=, inside a creds file's text) was shown whole, HasSecret missed
// a seed with a pasted newline, and pgx's require_auth= and the mysql
// driver's allow…Passwords= switches drew a false warning and lost their
// values from the drivers' own errors.
func TestSeedsAnywhereAndPlainParams(t *testing.T) {
	const seed = "SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY"
	creds := url.QueryEscape("-----BEGIN USER NKEY SEED-----\n" + seed + "\n------END USER NKEY SEED------\n")
	for _, raw := range []string{
		"nats://h:1/b?nkeys=" + seed, "nats://h:1/b?nkey_file=" + seed, "nats://h:1/b?user_creds=" + creds,
		"nats://h:1/b?nk=%20" + seed + "%0A", "nats://h:1/b?nkey=" + seed + "%0A", "nats://h:1/" + seed,
	} {
		if !HasSecret(raw) || !HasSeed(raw) {
			t.Errorf("HasSecret, HasSeed(%s) = %v, %v", raw, HasSecret(raw), HasSeed(raw))
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if s := Redact(u); strings.Contains(s, seed[:8]) {
			t.Errorf("Redact(%s) = %s", raw, s)
		}
		if s := RedactText(`unknown parameter "nkeys": `+raw+` `+u.RawQuery, u); strings.Contains(s, seed[:8]) {
			t.Errorf("RedactText with %s = %s", raw, s)
		}
	}
	for _, raw := range []string{
		"postgres://app@h:1/db?require_auth=scram-sha-256", "mysql://app@h:1/db?allowNativePasswords=true&allowCleartextPasswords=false",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if HasSecret(raw) || HasSeed(raw) || Redact(u) != u.String() {
			t.Errorf("%s: HasSecret %v, HasSeed %v, Redact %s", raw, HasSecret(raw), HasSeed(raw), Redact(u))
		}
	}
}

// Third and fourth re-test passes: a seed as the user name or the host, or
// in lower case, was shown; a password that lost its "@host" (letters, or
// digits past a port's range) drew no warning; an acl hash alone drew
// advice to use password_file=, which cannot hold one; and a long run of
// letters read as one huge seed took seconds to redact.
func TestSeedsEverySpellingAndKinds(t *testing.T) {
	const seed = "SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GVZC2WJUQQKXBORM"
	for raw, kind := range map[string]string{
		"nats://" + seed + ":x@h:1/b": "password", "redis://" + seed + ":pw@h:1": "password",
		"nats://h:1/b?nkeys=" + strings.ToLower(seed): "seed", "nats://" + seed + ":4222/b": "seed",
		"nats://127.0.0.1:1," + seed + ":4222/b": "seed",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if Kind(raw) != kind {
			t.Errorf("Kind(%s) = %q, want %q", raw, Kind(raw), kind)
		}
		for _, text := range []string{Redact(u), RedactText("open "+raw+": "+u.Query().Get("nkeys"), u)} {
			if strings.Contains(strings.ToUpper(text), seed[:12]) || strings.Contains(strings.ToUpper(text), seed[36:48]) {
				t.Errorf("%s: shown in %s", raw, text)
			}
		}
	}
	for raw, want := range map[string]string{
		`redis://:Zq"7kLmN3pQrS9tV`:     "password",
		"redis://app:Pw9xSecret":        "password",
		"redis://:98765432101":          "password",
		"redis://h1:6379,:98765432101":  "password",
		"redlock://[::1],h2,h3":         "",
		"redlock://[::1],[::2]:6379,h3": "",
		"memcached://[::1],h2:11211":    "",
		"redis://:sxkq2mzt4w7vbn3lpr6yhd5gjc2fa7eu4oiw3nkxyzabcdefghijklmn@h:1": "password",
		"redis://[::1]:6379":       "",
		"nats://h1:4222,h2:4222/b": "",
		"zk://h:1/x?acl=digest:ops:Jj+2xl2LGkwP/8PWn1cWN4JQln8=:r": "hash",
		"nats://TOK@h:1/b": "token",
	} {
		if got := Kind(raw); got != want {
			t.Errorf("Kind(%s) = %q, want %q", raw, got, want)
		}
	}
}

// A long run of seed-shaped text is no seed, nor many of them: redacting a
// URL of 64 KiB of it stays quick (it took minutes, a re-test pass). The
// bound asserted is loose on purpose; what it guards is the blow-up.
func TestLongSeedShapedTextIsQuick(t *testing.T) {
	for _, raw := range []string{
		"redis://" + strings.Repeat("s", 64<<10) + ":p@127.0.0.1:1",
		"nats://h:1/b?x=" + strings.Repeat("s+", 32<<10),
		"nats://h:1/b?x=" + strings.Repeat("SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GVZC2WJUQQKXBORM%20", 1000),
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = RedactText("error: "+raw, u)
			_ = Redact(u)
			_ = Kind(raw)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("redacting a %d-byte URL took over a minute", len(raw))
		}
	}
}

// A fifth re-test pass: "key" as a word of a name hid MySQL's
// foreign_key_checks=0 (and with it every "0" of the error) and
// sql_require_primary_key; pg's password_encryption and MySQL's
// generated_random_password_length drew false warnings; a seed glued to a
// '_' or in a fragment was shown; thousands of hash-shaped pieces took
// seconds to redact.
func TestPlainSettingsGluedSeedsManyHashes(t *testing.T) {
	for _, raw := range []string{
		"mysql://app@h:3306/db?foreign_key_checks=0", "mysql://app@h:3306/db?sql_require_primary_key=ON",
		"postgres://app@h/db?password_encryption=scram-sha-256", "mysql://app@h/db?generated_random_password_length=20",
		"mysql://app@h/db?default_authentication_plugin=caching_sha2_password",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if Kind(raw) != "" || Redact(u) != u.String() {
			t.Errorf("%s: Kind %q, Redact %s", raw, Kind(raw), Redact(u))
		}
	}
	const seed = "SUAMK2FG4MI6UE3ACF3FK3OIQBCEIEZV7NSWFFEW63UXMRLFM2XLAXK4GY"
	for _, raw := range []string{
		"nats://h:4222/x?inbox_prefix=_" + seed, "nats://h:4222/b_" + seed, "nats://h:4222/b?x=1#" + seed,
		"nats://h:4222/b?x=" + seed + "9",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if s := Redact(u) + RedactText("error: "+raw, u); strings.Contains(s, seed[:12]) || Kind(raw) != "seed" {
			t.Errorf("%s: Kind %q, shown in %s", raw, Kind(raw), s)
		}
	}
	raw := "redis://127.0.0.1:1/?db=x&" + strings.Repeat("abcdefghijklm+opqrstuvwxyz0=", 2340)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = Redact(u); _ = RedactText(raw, u) }()
	select {
	case <-done:
	case <-time.After(time.Minute): // loose: what it guards is the blow-up
		t.Fatal("redacting thousands of hash-shaped pieces took over a minute")
	}
}

// A sixth re-test pass: a seed right after another (one character between)
// was shown; private-key, api-key, signing_key and the like were not
// secret; MySQL and PostgreSQL settings named for passwords, seeds and
// authentication (geqo_seed=0, old_passwords=0) were, and hid every 0 of
// the error; thousands of secret parameters took seconds to redact.
func TestAdjacentSeedsKeyNamesSettings(t *testing.T) {
	const s1 = "SUAMK2FG4MI6UE3ACF3FK3OIQBCEIEZV7NSWFFEW63UXMRLFM2XLAXK4GY"
	const s2 = "SUBBK2FG4MI6UE3ACF3FK3OIQBCEIEZV7NSWFFEW63UXMRLFM2XLAXK4ZZ"
	for _, raw := range []string{
		"redis://127.0.0.1:1/?client_name=" + s1 + "-" + s2, "nats://127.0.0.1:1/b?inbox_prefix=" + s1 + "," + s2,
		"nats://127.0.0.1:1/" + s1 + "." + s2,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if s := Redact(u) + RedactText(`bucket "`+s1+"."+s2+`": `+raw, u); strings.Contains(s, s1[:12]) || strings.Contains(s, s2[:12]) {
			t.Errorf("%s: shown in %s", raw, s)
		}
	}
	for _, name := range []string{"private-key", "private.key", "api-key", "x-api-key", "access-key", "signing_key", "encryption_key", "master_key"} {
		if !secretParam(name) {
			t.Errorf("%s is no secret parameter", name)
		}
	}
	for _, raw := range []string{
		"postgres://u@h/db?geqo_seed=0", "mysql://u@h/db?rand_seed1=12345&rand_seed2=67890", "mysql://u@h/db?old_passwords=0",
		"mysql://u@h/db?password_history=5", "postgres://u@h/db?authentication_timeout=10s", "mysql://u@h/db?sql_require_primary_key=ON",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if Kind(raw) != "" || Redact(u) != u.String() {
			t.Errorf("%s: Kind %q, Redact %s", raw, Kind(raw), Redact(u))
		}
	}
	var q strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&q, "&pass%d=v%dq", i, i)
	}
	raw := "redis://127.0.0.1:1/?db=0" + q.String()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = RedactText("dlock: open "+Redact(u)+": refused", u)
		_ = RedactText(raw, u)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // loose: what it guards is the blow-up
		t.Fatal("redacting thousands of secret parameters took over a minute")
	}
}

// A seventh re-test pass: camelCase key names (accessKey, signingKey) and
// near forms (signing_keys, client_key2) were shown; a text holding a '%'
// brought back seconds of redaction for many secrets, and minutes for one
// of 64 KiB; and a password with a byte that is not UTF-8, shown as U+FFFD,
// was hidden only when the text held a '%'.
func TestCamelKeysPercentTextsBadBytes(t *testing.T) {
	for _, name := range []string{"accessKey", "signingKey", "encryptionKey", "masterKey", "hmacKey", "clientKey", "tlsKey",
		"signing_keys", "master_key_b64", "encryption_key_hex", "client_key2", "accesskey"} {
		if !secretParam(name) {
			t.Errorf("%s is no secret parameter", name)
		}
	}
	for _, name := range []string{"allowNativePasswords", "session_authorization", "foreign_key_checks", "sql_require_primary_key", "serverPubKey"} {
		if secretParam(name) {
			t.Errorf("%s is a secret parameter", name)
		}
	}
	var q strings.Builder
	for i := range 4235 {
		fmt.Fprintf(&q, "&pass%d=v%dq", i, i)
	}
	raw := "redis://127.0.0.1:1/?z%25z=1" + q.String()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	big, err := url.Parse("redis://u:" + strings.Repeat("ab", 32<<10) + "@127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = RedactText("dlock: open "+Redact(u)+": unexpected option: z%z", u)
		_ = RedactText("100% refused "+big.String()+" "+big.String(), big)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // loose: what it guards is the blow-up
		t.Fatal("redacting took over a minute")
	}
	bad, err := url.Parse("redis://u:abcdefgh%FFijklmnopqr@127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"auth failed for abcdefgh\uFFFDijklmnopqr", "auth failed (100%) for abcdefgh\uFFFDijklmnopqr"} {
		if s := RedactText(text, bad); strings.Contains(s, "ijklm") {
			t.Errorf("RedactText(%q) = %q", text, s)
		}
	}
}

// An eighth re-test pass, on the search without patterns: a raw '%' before
// hex digits read as an escape hid the secret after it ("100%deadbeef…")
// or of its own; a short secret right after an escape was taken for part
// of a word ("password%3Dhunter2"); and overlapping copies of a secret
// with a '+' were hidden in part.
func TestRawPercentEscapedNeighboursOverlaps(t *testing.T) {
	for _, tc := range []struct{ raw, text, secret string }{
		{"redis://:p%2541ssword@h", "AUTH %70%41ssword failed", "41ssword"},
		{"redis://:%2541zzzzzzzz@h", "rate %%41%7azzzzzzz refused", "zzzzzz"},
		{"redis://h/?token=deadbeefcafe1234", "100%deadbeefcafe12%334", "beefcafe"},
		{"redis://h/?password=abcdef%25", "pw %61bcdef%41 end", "bcdef"},
		{"redis://u:pw12@h", "dial redis://u%3Apw12%40h: refused", "pw12"},
		{"redis://h/?password=hunter2", "bad option password%3Dhunter2", "hunter2"},
		{"redis://h/?password=abcdefgh%2Babcdefgh", "AUTH abcdefgh+abcdefgh+abcdefgh failed", "abcdefgh"},
		{"redis://:ab+ab+ab+ab+@h", "AUTH ab+ab+ab+ab+ab+ab+ab+ failed", "ab+ab+ab+"},
	} {
		u, err := url.Parse(tc.raw)
		if err != nil {
			t.Fatal(err)
		}
		if s := RedactText(tc.text, u); strings.Contains(s, tc.secret) {
			t.Errorf("RedactText(%q) with %s = %q", tc.text, tc.raw, s)
		}
	}
}

// A ninth re-test pass: a short secret next to an escaped character past
// ASCII was kept (%E2 read as the letter â); a secret of one letter
// repeated, in a text repeating it, took minutes; and a secret's bad byte
// met inside a character of a valid text cut the character in half.
func TestEscapedNeighboursRepeatsHalfCharacters(t *testing.T) {
	u, err := url.Parse("redis://:hunter2@127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"pw=hunter2%E2%80%94end", "pw=hunter2%C2%A0end", "q=%E2%80%9Chunter2%E2%80%9D", "q=%E2%80%BAhunter2"} {
		if s := RedactText(text, u); strings.Contains(s, "hunter2") {
			t.Errorf("RedactText(%q) = %q", text, s)
		}
	}
	rep, err := url.Parse("redis://:" + strings.Repeat("a", 1024) + "@127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = RedactText("100% "+strings.Repeat("a", 8<<10), rep) }()
	select {
	case <-done:
	case <-time.After(time.Minute): // loose: what it guards is the blow-up
		t.Fatal("redacting a repeated secret took over a minute")
	}
	for raw, text := range map[string]string{"redis://:%A9abcd@127.0.0.1:1": "caféabcd", "redis://:abcd%C3@127.0.0.1:1": "abcdé"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if s := RedactText(text, u); !utf8.ValidString(s) {
			t.Errorf("RedactText(%q) with %s = %q, not UTF-8", text, raw, s)
		}
	}
}
