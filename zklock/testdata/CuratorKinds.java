// CuratorKinds holds an Apache Curator InterProcessReadWriteLock and an
// InterProcessSemaphoreV2 on a path for zklock's interoperability tests. It
// reads commands from stdin, one per line:
//
//	rlock | wlock          acquire the read or write lock, waiting; answers "locked"
//	tryr MS | tryw MS      acquire it within MS milliseconds; answers "locked" or "busy"
//	runlock | wunlock      release it; answers "unlocked"
//	acquire                take a lease, waiting; answers "leased"
//	tryacquire MS          take a lease within MS milliseconds; answers "leased" or "busy"
//	return                 return the oldest lease taken; answers "returned"
//
// and exits at end of input. Usage:
// java CuratorKinds.java host:port /rwpath /sempath maxLeases
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;

public class CuratorKinds {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 5000, 5000, new RetryOneTime(100));
        client.start();
        client.blockUntilConnected(30, TimeUnit.SECONDS);
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, args[1]);
        InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, args[2], Integer.parseInt(args[3]));
        ArrayDeque<Lease> leases = new ArrayDeque<>();
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] cmd = line.trim().split(" ");
            switch (cmd[0]) {
                case "rlock":
                    rw.readLock().acquire();
                    System.out.println("locked");
                    break;
                case "wlock":
                    rw.writeLock().acquire();
                    System.out.println("locked");
                    break;
                case "tryr":
                    System.out.println(rw.readLock().acquire(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS) ? "locked" : "busy");
                    break;
                case "tryw":
                    System.out.println(rw.writeLock().acquire(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS) ? "locked" : "busy");
                    break;
                case "runlock":
                    rw.readLock().release();
                    System.out.println("unlocked");
                    break;
                case "wunlock":
                    rw.writeLock().release();
                    System.out.println("unlocked");
                    break;
                case "acquire":
                    leases.add(sem.acquire());
                    System.out.println("leased");
                    break;
                case "tryacquire":
                    Lease l = sem.acquire(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS);
                    if (l != null) {
                        leases.add(l);
                    }
                    System.out.println(l != null ? "leased" : "busy");
                    break;
                case "return":
                    sem.returnLease(leases.poll());
                    System.out.println("returned");
                    break;
                default:
                    System.out.println("unknown " + line);
            }
            System.out.flush();
        }
        client.close();
    }
}
