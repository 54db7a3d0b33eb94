// CuratorLatch runs an Apache Curator LeaderLatch on a path with an id, for
// zklock's election interoperability test. It reads commands from stdin,
// one per line:
//
//	start     start the latch (campaign); answers "started"
//	await MS  wait up to MS milliseconds for the lead; answers "leader" or "not"
//	leader    answers the current leader's id, or "none"
//	close     close the latch (resign); answers "closed"
//
// and exits at end of input. Usage: java CuratorLatch.java host:port /path id
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLatch {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 5000, 5000, new RetryOneTime(100));
        client.start();
        client.blockUntilConnected(30, TimeUnit.SECONDS);
        LeaderLatch latch = new LeaderLatch(client, args[1], args[2]);
        System.out.println("ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] cmd = line.trim().split(" ");
            switch (cmd[0]) {
                case "start":
                    latch.start();
                    System.out.println("started");
                    break;
                case "await":
                    System.out.println(latch.await(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS) ? "leader" : "not");
                    break;
                case "leader":
                    Participant p = latch.getLeader();
                    System.out.println(p.isLeader() ? p.getId() : "none");
                    break;
                case "close":
                    latch.close();
                    System.out.println("closed");
                    break;
                default:
                    System.out.println("unknown " + line);
            }
            System.out.flush();
        }
        client.close();
    }
}
