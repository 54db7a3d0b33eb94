package testserver

import (
	"crypto/sha1"
	"encoding/base64"
)

// ZooKeeperSuper starts a private standalone ZooKeeper, configured as
// ZooKeeper's, whose superuser is user with password pw: a client that adds
// digest authentication as user:pw passes every ACL check (ZooKeeper's
// zookeeper.DigestAuthenticationProvider.superDigest).
func ZooKeeperSuper(t TB, user, pw string) *Server {
	t.Helper()
	return startZooKeeper(t, "-Dzookeeper.DigestAuthenticationProvider.superDigest="+user+":"+ZooKeeperDigest(user, pw))
}

// ZooKeeperDigest is the hash ZooKeeper's digest scheme keeps for user
// with password pw (base64 of the SHA-1 of "user:pw"), as in the ACL id
// "digest:user:HASH".
func ZooKeeperDigest(user, pw string) string {
	h := sha1.Sum([]byte(user + ":" + pw))
	return base64.StdEncoding.EncodeToString(h[:])
}
