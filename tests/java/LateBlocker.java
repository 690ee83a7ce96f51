/**
 * A method that looks demotable and blocks later: {@code Work.step} is hot,
 * short and never blocks for the first half of the run, so adaptive
 * demotion turns its probes off; in the second half one call in 256 sleeps
 * 1 ms. Runs for the given milliseconds, then prints how many of its calls
 * slept.
 */
public class LateBlocker {
    static long sink;
    static volatile boolean late;

    static final class Work {
        static int step(int k, int i) throws InterruptedException {
            if (late && k == 0 && (i & 255) == 0) {
                Thread.sleep(1);
            }
            // A loop of two rounds: short, but not a trivial method or forwarder.
            for (int r = 0; r < 2; r++) {
                k = Integer.rotateLeft(k, 3) * 31 + i;
            }
            return k;
        }
    }

    public static void main(String[] args) throws Exception {
        long millis = Long.parseLong(args[0]);
        long start = System.nanoTime();
        long half = start + millis * 500_000L;
        long end = start + millis * 1_000_000L;
        long sleeps = 0;
        int i = 0;
        for (long now = start; now < end; now = System.nanoTime()) {
            if (!late && now >= half) {
                late = true;
            }
            for (int k = 0; k < 200; k++) {
                sink += Work.step(k, i);
            }
            if (late && (i & 255) == 0) {
                sleeps++;
            }
            i++;
        }
        System.out.println("sleeps " + sleeps + " sink " + sink);
    }
}
