package zklock

import "github.com/dlock/dlock"

// ProvedTokens returns how many tokens c's driver took from the parent's
// pzxid instead of reading the node.
func ProvedTokens(c *dlock.Client) int64 {
	var d *zkDriver
	if !c.As(&d) {
		panic("not a zklock client")
	}
	return d.provedTokens.Load()
}
