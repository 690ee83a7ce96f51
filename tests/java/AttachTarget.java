import java.io.FileWriter;
import java.io.InputStreamReader;
import java.io.BufferedReader;
import java.io.PrintWriter;

/**
 * A program started without any agent, for `jtrace attach` tests.
 *
 * Thread "attach-worker" calls {@link #work} about once per millisecond (it
 * sleeps 1 ms between calls) until the program's stdin is closed. Every 50th
 * call throws, and the caller catches it. The program keeps its own record of
 * every call: the System.nanoTime() (CLOCK_MONOTONIC, the trace's clock) at
 * which it was made, written to a file at the end, so a test can count the
 * calls that fell inside a traced window independently of the trace. It then
 * prints a summary that depends only on the number of calls and exits with
 * code 7, whatever happened to it meanwhile. Three daemon threads whose
 * names differ only after their 15th byte sleep meanwhile, and thread
 * "attach-parker" parks 2 ms at a time.
 *
 * Argument: file for the call times.
 */
public class AttachTarget {
    static volatile long sink;
    static volatile boolean stop;

    static long work(int i) {
        long x = i;
        for (int k = 0; k < 200; k++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink = x;
        if (i % 50 == 49) {
            throw new IllegalStateException("call " + i);
        }
        return i;
    }

    public static void main(String[] args) throws Exception {
        // Ten minutes at one call per millisecond.
        final long[] times = new long[600_000];
        final long[] sum = new long[1];
        final int[] counts = new int[2];
        Thread worker = new Thread(() -> {
            for (int i = 0; i < times.length && !stop; i++) {
                times[i] = System.nanoTime();
                try {
                    sum[0] += work(i);
                } catch (IllegalStateException e) {
                    counts[1]++;
                }
                counts[0] = i + 1;
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "attach-worker");
        worker.start();
        // Threads whose names the kernel cuts to the same 15 bytes
        // ("attach-idle-thr"), waking every 100 ms.
        for (int k = 1; k <= 3; k++) {
            Thread idle = new Thread(() -> {
                while (true) {
                    try {
                        Thread.sleep(100);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "attach-idle-thread-" + k);
            idle.setDaemon(true);
            idle.start();
        }
        // A thread that parks (LockSupport, as every j.u.c wait does).
        Thread parker = new Thread(() -> {
            while (true) {
                java.util.concurrent.locks.LockSupport.parkNanos(2_000_000L);
            }
        }, "attach-parker");
        parker.setDaemon(true);
        parker.start();
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        while (in.readLine() != null) {
        }
        stop = true;
        worker.join();
        try (PrintWriter w = new PrintWriter(new FileWriter(args[0]))) {
            for (int i = 0; i < counts[0]; i++) {
                w.println(times[i]);
            }
        }
        System.out.println("calls " + counts[0] + " thrown " + counts[1] + " sum " + sum[0]);
        System.exit(7);
    }
}
