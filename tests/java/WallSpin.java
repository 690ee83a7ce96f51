import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * Threads that each spin for a given wall time inside WallSpin.spin (not
 * CPU time: under a CPU quota or contention they get less of it). With
 * "stat", the main thread prints the time (System.nanoTime()) and
 * /proc/stat's per-CPU lines right before the threads start and right
 * after they end ("before-time ...", "before cpu1 ..."), so the steal of
 * their CPUs over their whole lives can be compared.
 *
 * Usage: WallSpin MILLIS THREADS [stat]
 */
public class WallSpin {
    static volatile long sink;

    static long spin(long millis) {
        long end = System.nanoTime() + millis * 1_000_000L;
        long x = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 500; i++) {
                x += i ^ (x << 1);
            }
        }
        sink = x;
        return x;
    }

    static void printStat(String tag) throws Exception {
        // System.nanoTime() is CLOCK_MONOTONIC: the trace's clock.
        System.out.println(tag + "-time " + System.nanoTime());
        for (String line : Files.readAllLines(Paths.get("/proc/stat"))) {
            if (line.startsWith("cpu") && !line.startsWith("cpu ")) {
                System.out.println(tag + " " + line);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        long ms = Long.parseLong(args[0]);
        int n = Integer.parseInt(args[1]);
        boolean stat = args.length > 2 && args[2].equals("stat");
        Thread[] threads = new Thread[n];
        for (int i = 0; i < n; i++) {
            threads[i] = new Thread(() -> spin(ms), "spin-" + i);
        }
        if (stat) {
            printStat("before");
        }
        for (Thread t : threads) {
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        if (stat) {
            printStat("after");
        }
        System.out.println("spun " + n);
    }
}
