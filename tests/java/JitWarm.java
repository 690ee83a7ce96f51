/**
 * A small method called until HotSpot compiles it (tests/run_e2e.rs,
 * `jit_state_at_entry`). Usage: java JitWarm <calls>
 */
public class JitWarm {
    static volatile long sink;

    static long work(long x) {
        return x * 2654435761L ^ (x >>> 7);
    }

    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        long s = 0;
        for (int i = 0; i < n; i++) {
            s += work(i);
        }
        sink = s;
        System.out.println("DONE " + (s & 1));
    }
}
