package main_test

import "testing"

// The multi mode sells exactly the stock, two items per order from two
// segments locked together with LockAll, on the embedded etcd and on Redis.
func TestDemoMulti(t *testing.T) {
	u := redisURL(t)
	for _, args := range [][]string{
		{"demo", "-o", "json", "--modes", "multi", "--requests", "120", "--stock", "100"},
		{"demo", "-o", "json", "--backend", u, "--store", u, "--modes", "multi", "--requests", "120", "--stock", "100", "--segments", "5"},
	} {
		r := dlockCmd(t, nil, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		rows := demoRows(t, r.stdout)
		if len(rows) != 1 {
			t.Fatalf("want 1 row, got %d", len(rows))
		}
		if row := rows[0]; row.Mode != "multi" || row.Sold != 100 || row.FinalStock != 0 || row.Oversold != 0 || row.Lost != 0 || row.Errors != 0 {
			t.Errorf("%v: %+v; want the whole stock of 100 sold, none over or lost", args, row)
		}
	}
}
