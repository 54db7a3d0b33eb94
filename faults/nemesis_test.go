package faults

import (
	"testing"

	"github.com/dlock/dlock/internal/testserver"
)

// A ZooKeeper member restarted by kill-leader answers srvr before it has
// synced with the new leader. KillLeader.Settle returns only once every
// member serves again, so that the next injection is one failure, not a
// leader killed while another member is still syncing (ZooKeeper 3.8.0
// then lost acknowledged writes, and with them a semaphore's releases).
func TestKillLeaderSettlesUntilTheMemberServes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ZooKeeper ensemble")
	}
	servers := testserver.ZooKeeperEnsemble(t, 3)
	var leader *testserver.Server
	for _, s := range servers {
		if testserver.ZooKeeperMode(s) == "leader" {
			leader = s
		}
	}
	if leader == nil {
		t.Fatal("no leader")
	}
	leader.Kill()
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s just after its start: mode %q", leader.Name, testserver.ZooKeeperMode(leader))
	r := &run{store: &Store{Kind: "zk3", Servers: servers}}
	if err := KillLeader.Settle(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if m := testserver.ZooKeeperMode(s); m != "leader" && m != "follower" {
			t.Errorf("%s is %q after Settle, want leader or follower", s.Name, m)
		}
	}
}
