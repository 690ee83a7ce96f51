/**
 * Busy for a while: threads calling two small methods at a high rate (many
 * JVM events), then, if asked, lingering with nothing to do.
 * Usage: Busy MILLIS THREADS [LINGER_MILLIS]. Prints its pid first.
 */
public class Busy {
    static volatile long sink;

    static long leaf(long x) {
        return x * 31 + 7;
    }

    static long mid(long x) {
        long s = 0;
        for (int i = 0; i < 4; i++) {
            s += leaf(x + i);
        }
        return s;
    }

    static void work(long end) {
        long n = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                n += mid(i);
            }
            sink += n;
        }
    }

    public static void main(String[] args) throws Exception {
        System.out.println("pid " + ProcessHandle.current().pid());
        System.out.flush();
        long millis = Long.parseLong(args[0]);
        int threads = Integer.parseInt(args[1]);
        long linger = args.length > 2 ? Long.parseLong(args[2]) : 0;
        long end = System.nanoTime() + millis * 1_000_000L;
        Thread[] ts = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            ts[i] = new Thread(() -> work(end), "busy-" + i);
            ts[i].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        System.out.println("busy done");
        System.out.flush();
        Thread.sleep(linger);
    }
}
