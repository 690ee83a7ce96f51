import java.util.ArrayList;
import java.util.List;

/**
 * Virtual threads calling a traced method (agent/tests/probe_buffers.rs;
 * Java 21+). Usage: java VirtualCalls <virtual threads> <calls each> <calls on main>
 *
 * main calls step() on its platform thread, then each virtual thread calls
 * it, sleeping now and then so that the virtual threads move between
 * carriers. Prints "DONE".
 */
public class VirtualCalls {
    static volatile int sink;

    static int step(int x) {
        return x * 31 + 7;
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        int calls = Integer.parseInt(args[1]);
        int onMain = Integer.parseInt(args[2]);
        for (int k = 0; k < onMain; k++) {
            sink += step(k);
        }
        List<Thread> all = new ArrayList<>();
        for (int v = 0; v < threads; v++) {
            all.add(Thread.ofVirtual().start(() -> {
                for (int k = 0; k < calls; k++) {
                    sink += step(k);
                    if (k % 100 == 0) {
                        try {
                            Thread.sleep(1);
                        } catch (InterruptedException e) {
                            throw new RuntimeException(e);
                        }
                    }
                }
            }));
        }
        for (Thread t : all) {
            t.join();
        }
        System.out.println("DONE");
    }
}
