package testserver

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
)

// ZooKeeperSuper starts a private standalone ZooKeeper, configured as
// ZooKeeper's, whose superuser is user with password pw: a client that adds
// digest authentication as user:pw passes every ACL check (ZooKeeper's
// zookeeper.DigestAuthenticationProvider.superDigest).
func ZooKeeperSuper(t TB, user, pw string) *Server {
	t.Helper()
	java := zkJava(t)
	s := &Server{Name: "zookeeper", bin: java}
	s.args = func(port int, dir string) []string {
		cfg := filepath.Join(dir, "zoo.cfg")
		body := fmt.Sprintf("tickTime=250\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n",
			filepath.Join(dir, "data"), port)
		_ = os.WriteFile(cfg, []byte(body), 0o600)
		return []string{"-Xmx256m", "-cp", zkClasspath, "-Dzookeeper.log.dir=" + dir,
			"-Dzookeeper.DigestAuthenticationProvider.superDigest=" + user + ":" + ZooKeeperDigest(user, pw),
			"org.apache.zookeeper.server.ZooKeeperServerMain", cfg}
	}
	s.ready = zkReady
	s.start(t)
	return s
}

// ZooKeeperDigest is the hash ZooKeeper's digest scheme keeps for user
// with password pw (base64 of the SHA-1 of "user:pw"), as in the ACL id
// "digest:user:HASH".
func ZooKeeperDigest(user, pw string) string {
	h := sha1.Sum([]byte(user + ":" + pw))
	return base64.StdEncoding.EncodeToString(h[:])
}
