import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * Test workload for the jtrace agent. Usage: java Demo <n>
 *
 * Calls traced(i) and untraced(i) n times on the main thread and on two
 * worker threads ("worker-0", "worker-1"), then catcher() once, which calls
 * thrower() which throws. Prints, for the test to compare with the trace:
 *   T0 <System.nanoTime() at start>
 *   TID <thread name> <kernel tid>
 *   T1 <System.nanoTime() at end>
 *   RESULT <checksum>
 */
public class Demo {
    static int caught;

    static int traced(int x) {
        return x + 1;
    }

    static int untraced(int x) {
        return x * 2;
    }

    static void thrower(int i) {
        if (i >= 0) {
            throw new IllegalStateException("boom " + i);
        }
    }

    static void catcher() {
        try {
            thrower(1);
        } catch (IllegalStateException e) {
            caught++;
        }
    }

    /** Kernel tid of the calling thread: /proc/thread-self -> "<pid>/task/<tid>". */
    static String tid() throws Exception {
        String s = Files.readSymbolicLink(Paths.get("/proc/thread-self")).toString();
        return s.substring(s.lastIndexOf('/') + 1);
    }

    static long work(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) {
            s += traced(i);
            s += untraced(i);
        }
        return s;
    }

    static final class Worker extends Thread {
        final int n;
        long sum;

        Worker(String name, int n) {
            super(name);
            this.n = n;
        }

        @Override
        public void run() {
            try {
                System.out.println("TID " + getName() + " " + tid());
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            sum = work(n);
        }
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        System.out.println("T0 " + System.nanoTime());
        System.out.println("TID main " + tid());
        long s = work(n);
        catcher();
        Worker[] ws = {new Worker("worker-0", n), new Worker("worker-1", n)};
        for (Worker w : ws) {
            w.start();
        }
        for (Worker w : ws) {
            w.join();
            s += w.sum;
        }
        System.out.println("T1 " + System.nanoTime());
        System.out.println("RESULT " + s + " caught=" + caught);
    }
}
