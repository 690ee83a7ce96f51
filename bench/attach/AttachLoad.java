/**
 * Load for bench/attach.sh: one thread calls {@link #batch} (10,000
 * dependent xorshift steps, about 10 µs) in a loop and prints, every 100 ms,
 * the milliseconds since start and how many batches it ran in that
 * interval. Runs for the given number of seconds.
 */
public class AttachLoad {
    static long batch(long x) {
        for (int i = 0; i < 10_000; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
        }
        return x;
    }

    public static void main(String[] args) {
        long runNs = Long.parseLong(args[0]) * 1_000_000_000L;
        long t0 = System.nanoTime();
        long next = t0 + 100_000_000L;
        long x = 1, n = 0;
        while (true) {
            x = batch(x);
            n++;
            long now = System.nanoTime();
            if (now >= next) {
                System.out.println((now - t0) / 1_000_000 + " " + n);
                n = 0;
                next += 100_000_000L;
                if (now - t0 >= runNs) {
                    break;
                }
            }
        }
        System.out.println("done " + (x == 42 ? "" : "."));
    }
}
