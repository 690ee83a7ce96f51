/**
 * A flight-recorder workload: one thread inside a single
 * invocation of outer() for the whole run, which calls step() (a 20 ms
 * sleep, then a little work) over and over; other threads call a tiny
 * method at a high rate, so that the trace grows fast and a ring
 * recording goes through many chunks.
 * Usage: RingWork MILLIS HOT_THREADS. Prints its pid first, "done" last.
 */
public class RingWork {
    static volatile long sink;

    static long tiny(long x) {
        return x * 31 + 7;
    }

    static void hot(long end) throws InterruptedException {
        long n = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                n += tiny(i);
            }
            sink += n;
            // About 25 MB/s of trace whatever the CPU: fast enough to go
            // through many chunks, slow enough that the last window holds
            // many steps.
            Thread.sleep(1);
        }
    }

    static void step(int i) throws InterruptedException {
        Thread.sleep(20);
        long s = 0;
        for (int k = 0; k < 10_000; k++) {
            s += k ^ i;
        }
        sink += s;
    }

    static int outer(long end) throws InterruptedException {
        int steps = 0;
        while (System.nanoTime() < end) {
            step(steps++);
        }
        return steps;
    }

    public static void main(String[] args) throws Exception {
        System.out.println("pid " + ProcessHandle.current().pid());
        System.out.flush();
        long millis = Long.parseLong(args[0]);
        int hot = Integer.parseInt(args[1]);
        long end = System.nanoTime() + millis * 1_000_000L;
        int[] steps = new int[1];
        Thread o = new Thread(() -> {
            try {
                steps[0] = outer(end);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, "ring-outer");
        o.start();
        Thread[] ts = new Thread[hot];
        for (int i = 0; i < hot; i++) {
            ts[i] = new Thread(() -> {
                try {
                    hot(end);
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            }, "ring-hot-" + i);
            ts[i].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        o.join();
        System.out.println("steps " + steps[0]);
        System.out.println("done");
        System.out.flush();
    }
}
