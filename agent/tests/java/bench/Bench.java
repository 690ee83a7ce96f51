/**
 * Probe-overhead benchmark of the jtrace agent (agent/tests/rewrite.rs,
 * ignored test `bench_probe_overhead`). Usage: java Bench <calls per round> <rounds>
 *
 * Per round prints "ROUND <ns per traced tiny() call> <ns per untraced
 * call> <ns per 2 x System.nanoTime()>", all measured in the same JVM.
 */
public class Bench {
    static int tiny(int x) {
        return x + 1;
    }

    static int plain(int x) {
        return x + 1;
    }

    static long sink;

    static double traced(int n) {
        long t0 = System.nanoTime();
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += tiny(i);
        }
        long t1 = System.nanoTime();
        sink += s;
        return (t1 - t0) / (double) n;
    }

    static double untraced(int n) {
        long t0 = System.nanoTime();
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += plain(i);
        }
        long t1 = System.nanoTime();
        sink += s;
        return (t1 - t0) / (double) n;
    }

    static double clocks(int n) {
        long t0 = System.nanoTime();
        long s = 0;
        for (int i = 0; i < n; i++) {
            s += System.nanoTime() ^ System.nanoTime();
        }
        long t1 = System.nanoTime();
        sink += s;
        return (t1 - t0) / (double) n;
    }

    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        int rounds = Integer.parseInt(args[1]);
        // Warm-up: get everything compiled.
        for (int w = 0; w < 3; w++) {
            traced(n / 4);
            untraced(n / 4);
            clocks(n / 4);
        }
        for (int r = 0; r < rounds; r++) {
            double a = traced(n);
            double b = untraced(n);
            double c = clocks(n);
            System.out.printf("ROUND %.2f %.2f %.2f%n", a, b, c);
        }
        System.out.println("SINK " + (sink & 1));
    }
}
