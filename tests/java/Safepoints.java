/** A worker computes while another thread forces safepoints (thread dumps). */
public class Safepoints {
    static volatile long sink;
    static volatile boolean dumped;

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
        // Optional: a pause before the dumps (ms), for probes that come late.
        long pause = args.length > 1 ? Long.parseLong(args[1]) : 0;
        // The worker computes until every dump is done (however long they
        // take on a loaded machine), so it sees every safepoint.
        Thread w = new Thread(() -> {
            while (!dumped) sink += compute(2_000_000);
        }, "worker");
        w.start();
        Thread d = new Thread(() -> {
            try {
                Thread.sleep(pause);
            } catch (InterruptedException e) {
                // Dump now.
            }
            dumps(dumps);
            dumped = true;
        }, "dumper");
        d.start();
        d.join();
        w.join();
        System.out.println("done " + dumps);
    }
}
