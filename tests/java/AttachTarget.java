import java.io.FileWriter;
import java.io.PrintWriter;

/**
 * A program started without any agent, for `jtrace attach` tests.
 *
 * Thread "attach-worker" calls {@link #work} exactly CALLS times, about one
 * call per millisecond (it sleeps 1 ms between calls). Every 50th call
 * throws, and the caller catches it. The program keeps its own record of
 * every call: the System.nanoTime() (CLOCK_MONOTONIC, the trace's clock) at
 * which it was made, written to a file at the end, so a test can count the
 * calls that fell inside a traced window independently of the trace. It
 * prints a deterministic summary and exits with code 7, whatever happened
 * to it meanwhile.
 *
 * Arguments: number of calls, file for the call times.
 */
public class AttachTarget {
    static volatile long sink;

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
        final int calls = Integer.parseInt(args[0]);
        final long[] times = new long[calls];
        final long[] sum = new long[1];
        final int[] thrown = new int[1];
        Thread worker = new Thread(() -> {
            for (int i = 0; i < calls; i++) {
                times[i] = System.nanoTime();
                try {
                    sum[0] += work(i);
                } catch (IllegalStateException e) {
                    thrown[0]++;
                }
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "attach-worker");
        worker.start();
        System.out.println("ready");
        System.out.flush();
        worker.join();
        try (PrintWriter w = new PrintWriter(new FileWriter(args[1]))) {
            for (long t : times) {
                w.println(t);
            }
        }
        System.out.println("calls " + calls + " thrown " + thrown[0] + " sum " + sum[0]);
        System.exit(7);
    }
}
