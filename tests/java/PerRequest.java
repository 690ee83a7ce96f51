/**
 * A demoted method's calls after its demotion, estimated from its traced
 * caller: {@code request} (it sleeps in one call of 256, so it blocks and
 * keeps its probes) calls the hot tiny {@code helper} (demoted) exactly
 * 50 times per call, for the given milliseconds; then prints how often
 * each ran. The agent's rate at the demotion is that of the calls it had
 * seen, the first and slowest ones, and says little about the calls
 * after it; the calls per request stay 50.
 */
public class PerRequest {
    static long sink;

    static final class Work {
        static int helper(int i) {
            for (int k = 0; k < 2; k++) {
                i = Integer.rotateLeft(i, 3) * 31 + 7;
            }
            return i;
        }

        static void request(int r) throws InterruptedException {
            for (int k = 0; k < 50; k++) {
                sink += helper(r + k);
            }
            if ((r & 255) == 0) {
                Thread.sleep(1);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000L;
        int r = 0;
        while (System.nanoTime() < end) {
            Work.request(r++);
        }
        System.out.println("request " + r + " helper " + 50L * r + " sink " + sink);
    }
}
