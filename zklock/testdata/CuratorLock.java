// CuratorLock holds an Apache Curator InterProcessMutex on a path for
// zklock's interoperability test. It reads commands from stdin, one per line:
//
//	lock    acquire, waiting; answers "locked"
//	try MS  acquire within MS milliseconds; answers "locked" or "busy"
//	unlock  release; answers "unlocked"
//
// and exits at end of input. Usage: java CuratorLock.java host:port /path
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLock {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 5000, 5000, new RetryOneTime(100));
        client.start();
        client.blockUntilConnected(30, TimeUnit.SECONDS);
        InterProcessMutex mutex = new InterProcessMutex(client, args[1]);
        System.out.println("ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] cmd = line.trim().split(" ");
            switch (cmd[0]) {
                case "lock":
                    mutex.acquire();
                    System.out.println("locked");
                    break;
                case "try":
                    System.out.println(mutex.acquire(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS) ? "locked" : "busy");
                    break;
                case "unlock":
                    mutex.release();
                    System.out.println("unlocked");
                    break;
                default:
                    System.out.println("unknown " + line);
            }
            System.out.flush();
        }
        client.close();
    }
}
