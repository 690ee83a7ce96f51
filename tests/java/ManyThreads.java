/**
 * Many threads, for the width of the views: 150 named alike
 * ("worker-N") and 50 with long names of their own, each sleeping a
 * little and then taking one shared monitor in turn.
 * Usage: ManyThreads [alike] [named]
 */
public class ManyThreads {
    static final Object LOCK = new Object();
    static volatile long sink;

    static void work() {
        try {
            Thread.sleep(20);
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
        synchronized (LOCK) {
            for (int i = 0; i < 20_000; i++) {
                sink += i;
            }
        }
    }

    /** A name without a trailing number, so no two are grouped. */
    static String longName(int i) {
        StringBuilder s = new StringBuilder("request-handler-for-a-tenant-with-a-rather-long-name-");
        for (int n = i; ; n /= 26) {
            s.append((char) ('a' + n % 26));
            if (n < 26) {
                break;
            }
        }
        return s.toString();
    }

    public static void main(String[] args) throws Exception {
        int alike = args.length > 0 ? Integer.parseInt(args[0]) : 150;
        int named = args.length > 1 ? Integer.parseInt(args[1]) : 50;
        Thread[] threads = new Thread[alike + named];
        for (int i = 0; i < threads.length; i++) {
            String name = i < alike ? "worker-" + i : longName(i);
            threads[i] = new Thread(ManyThreads::work, name);
            threads[i].start();
        }
        for (Thread t : threads) {
            t.join();
        }
        System.out.println("threads done: " + threads.length);
    }
}
