import java.util.concurrent.Semaphore;

/**
 * Ground truth for the probes' per-thread buffers (agent/tests/probe_buffers.rs).
 * Usage: java ProbeThreads <calls per thread> <gap ms>
 *
 * main calls step() once, waits <gap ms> (longer than a 32-bit nanosecond
 * delta when the test wants one) and calls it again. Then two threads whose
 * Java thread ids share one slot of the probes' thread-id cache take turns
 * (through semaphores) calling step(), so each call finds the other thread
 * in the slot. Every call is printed as "CALL <thread> <k> <before> <after>"
 * with System.nanoTime() read just before and just after it.
 */
public class ProbeThreads {
    /** The probes' cache size (jtrace.Probe.SLOTS). */
    static final int SLOTS = 1024;

    static int step(int x) {
        return x * 31 + 7;
    }

    static volatile int sink;

    static long[][] calls(int n, Semaphore mine, Semaphore other) throws InterruptedException {
        long[][] t = new long[n][2];
        for (int k = 0; k < n; k++) {
            mine.acquire();
            t[k][0] = System.nanoTime();
            sink += step(k);
            t[k][1] = System.nanoTime();
            other.release();
        }
        return t;
    }

    static void print(String name, long[][] t) {
        StringBuilder sb = new StringBuilder();
        for (int k = 0; k < t.length; k++) {
            sb.append("CALL ").append(name).append(' ').append(k).append(' ')
                .append(t[k][0]).append(' ').append(t[k][1]).append('\n');
        }
        System.out.print(sb);
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        long gap = Long.parseLong(args[1]);
        long[][] mainCalls = new long[2][2];
        mainCalls[0][0] = System.nanoTime();
        sink += step(-1);
        mainCalls[0][1] = System.nanoTime();
        Thread.sleep(gap);
        mainCalls[1][0] = System.nanoTime();
        sink += step(-2);
        mainCalls[1][1] = System.nanoTime();
        print("main", mainCalls);

        Semaphore sa = new Semaphore(1);
        Semaphore sb = new Semaphore(0);
        long[][][] out = new long[2][][];
        Thread a = new Thread(() -> {
            try {
                out[0] = calls(n, sa, sb);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, "slot-a");
        Runnable bBody = () -> {
            try {
                out[1] = calls(n, sb, sa);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        };
        Thread b;
        do {
            b = new Thread(bBody, "slot-b");
        } while ((b.getId() - a.getId()) % SLOTS != 0);
        System.out.println("IDS " + a.getId() + " " + b.getId());
        a.start();
        b.start();
        a.join();
        b.join();
        print("slot-a", out[0]);
        print("slot-b", out[1]);
    }
}
