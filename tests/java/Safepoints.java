/** A worker computes while another thread forces safepoints (thread dumps). */
public class Safepoints {
    static volatile long sink;

    static long compute(long n) {
        long h = 0;
        for (long i = 0; i < n; i++) {
            h = h * 31 + i;
            if ((i & 0xffff) == 0) sink = h;
        }
        return h;
    }

    static void dumps(int n) {
        for (int i = 0; i < n; i++) {
            Thread.getAllStackTraces();
        }
    }

    public static void main(String[] args) throws Exception {
        int dumps = Integer.parseInt(args[0]);
        Thread w = new Thread(() -> {
            long end = System.nanoTime() + 400_000_000L;
            while (System.nanoTime() < end) sink += compute(2_000_000);
        }, "worker");
        w.start();
        Thread d = new Thread(() -> dumps(dumps), "dumper");
        d.start();
        d.join();
        w.join();
        System.out.println("done " + dumps);
    }
}
