/**
 * A small method called until HotSpot compiles it (tests/run_e2e.rs,
 * `jit_state_at_entry`). Usage: java JitWarm <calls>
 */
public class JitWarm {
    static volatile long sink;

    // Four rounds of a hash: interpreted, about 100 ns more than compiled,
    // which a call's two clock reads (about 30 ns) cannot hide.
    static long work(long x) {
        for (int i = 0; i < 4; i++) {
            x = x * 2654435761L ^ (x >>> 7);
        }
        return x;
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
