/**
 * Probe-overhead benchmark of the jtrace agent (agent/tests/rewrite.rs,
 * ignored test `bench_probe_overhead`; agent/bench/method_cost.sh). Usage:
 * java Bench <calls per round> <rounds> [virtual]   ("virtual": on a virtual thread)
 *
 * Per round prints "ROUND <ns per traced tiny() call> <ns per untraced
 * call> <ns per 2 x System.nanoTime()> <process CPU ns per traced call>",
 * all measured in the same JVM. The last column is the CPU time of every
 * thread of the process during the traced loop (the tracer's own threads
 * included), from /proc/self/task/{tid}/schedstat; -1 if unavailable.
 */
public class Bench {
    /** Sum of the run time (ns) of every thread of this process. */
    static long processCpuNs() {
        long sum = 0;
        java.io.File[] tasks = new java.io.File("/proc/self/task").listFiles();
        if (tasks == null) {
            return -1;
        }
        for (java.io.File t : tasks) {
            try {
                String s = new String(java.nio.file.Files.readAllBytes(new java.io.File(t, "schedstat").toPath()));
                sum += Long.parseLong(s.trim().split(" ")[0]);
            } catch (Exception e) {
                // The thread ended meanwhile.
            }
        }
        return sum;
    }

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

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        int rounds = Integer.parseInt(args[1]);
        if (args.length > 2 && args[2].equals("virtual")) {
            // The same rounds on a virtual thread (JDK 21 and later; started
            // through reflection, the class is compiled for older releases).
            Thread t = (Thread) Thread.class.getMethod("startVirtualThread", Runnable.class)
                    .invoke(null, (Runnable) () -> measure(n, rounds));
            t.join();
        } else {
            measure(n, rounds);
        }
        System.out.println("SINK " + (sink & 1));
    }

    static void measure(int n, int rounds) {
        // Warm-up: get everything compiled.
        for (int w = 0; w < 3; w++) {
            traced(n / 4);
            untraced(n / 4);
            clocks(n / 4);
        }
        for (int r = 0; r < rounds; r++) {
            long cpu0 = processCpuNs();
            double a = traced(n);
            long cpu1 = processCpuNs();
            double b = untraced(n);
            double c = clocks(n);
            double cpu = cpu0 < 0 || cpu1 < 0 ? -1 : (cpu1 - cpu0) / (double) n;
            System.out.printf("ROUND %.2f %.2f %.2f %.2f%n", a, b, c, cpu);
        }
    }
}
