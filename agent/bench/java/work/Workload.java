package work;

import java.io.File;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import infra.Store;

/**
 * A request-processing workload for the tracing-overhead benchmark
 * (agent/bench/workload.sh). Usage:
 * java work.Workload [threads] [requests] [body words] [short|steady]
 *
 * A pool of worker threads takes request numbers from a shared counter and
 * handles each one: build and parse a request line, validate it, hash its
 * body (SHA-256), look it up in and update a shared LRU cache (a lock,
 * package infra), aggregate per-user statistics (a concurrent map, package
 * infra) and render a response (sorting a small list). The methods of
 * package `work` are the traced ones: 6 calls per request. The body size
 * (default 200 words of 8 bytes) sets the work per call.
 *
 * "short" (the default): a warm-up run of a quarter of the requests, then
 * the measured run of all of them; the JIT compilers are typically still at
 * work in the measured run. "steady": warm-up runs of a tenth of the
 * requests each until the JIT is done (the compiler threads used less than
 * 1 % of the workers' CPU in the last one, at least 5 s, at most 60 s), then
 * the measured run: it measures the per-call cost without the one-off JIT
 * work.
 *
 * Prints, for the measured run: "ELAPSED_MS" (wall), "WORKER_CPU_MS" (CPU
 * time of its worker threads), "JIT_CPU_MS" (CPU time of the JIT compiler
 * threads) and "PROCESS_CPU_MS" (every thread of the JVM); for the warm-up:
 * "WARMUP_MS" and "WARMUP_JIT_CPU_MS"; then a checksum.
 */
public final class Workload {
    static final AtomicLong CHECKSUM = new AtomicLong();
    /** CPU time of the worker threads of the last run, ns. */
    static final AtomicLong WORKER_CPU = new AtomicLong();

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 4;
        int requests = args.length > 1 ? Integer.parseInt(args[1]) : 300_000;
        int words = args.length > 2 ? Integer.parseInt(args[2]) : 200;
        String mode = args.length > 3 ? args[3] : "short";
        if (!mode.equals("short") && !mode.equals("steady")) {
            System.err.println("mode must be short or steady, not " + mode);
            System.exit(2);
        }
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        Store store = new Store(4096);
        long w0 = System.nanoTime();
        long jit0 = jitCpuNs();
        if (mode.equals("short")) {
            run(threads, requests / 4, store, words);
        } else {
            long deadline = w0 + 60_000_000_000L;
            while (true) {
                long j = jitCpuNs();
                WORKER_CPU.set(0);
                run(threads, Math.max(1, requests / 10), store, words);
                long jit = jitCpuNs() - j;
                long now = System.nanoTime();
                if ((now - w0 >= 5_000_000_000L && jit * 100 < WORKER_CPU.get()) || now > deadline) {
                    break;
                }
            }
        }
        long warmupNs = System.nanoTime() - w0;
        long warmupJit = jitCpuNs() - jit0;
        WORKER_CPU.set(0);
        long jit1 = jitCpuNs();
        long cpu1 = os.getProcessCpuTime();
        long t0 = System.nanoTime();
        run(threads, requests, store, words);
        long t1 = System.nanoTime();
        long cpu2 = os.getProcessCpuTime();
        long jit2 = jitCpuNs();
        System.out.printf("ELAPSED_MS %.1f%n", (t1 - t0) / 1e6);
        System.out.printf("WORKER_CPU_MS %.1f%n", WORKER_CPU.get() / 1e6);
        System.out.printf("JIT_CPU_MS %.1f%n", (jit2 - jit1) / 1e6);
        System.out.printf("PROCESS_CPU_MS %.1f%n", (cpu2 - cpu1) / 1e6);
        System.out.printf("WARMUP_MS %.1f%n", warmupNs / 1e6);
        System.out.printf("WARMUP_JIT_CPU_MS %.1f%n", warmupJit / 1e6);
        System.out.println("CHECKSUM " + CHECKSUM.get() + " " + store.size());
    }

    static void run(int threads, int requests, Store store, int words) throws InterruptedException {
        AtomicInteger next = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(threads);
        for (int t = 0; t < threads; t++) {
            Thread w = new Thread(() -> {
                long cpu0 = threadCpuNs();
                Handler h = new Handler(store, words);
                int i;
                while ((i = next.getAndIncrement()) < requests) {
                    CHECKSUM.addAndGet(h.handle(i).length());
                }
                WORKER_CPU.addAndGet(threadCpuNs() - cpu0);
                done.countDown();
            }, "worker-" + t);
            w.start();
        }
        done.await();
    }

    /** CPU time of the calling thread (ns), from /proc/thread-self/schedstat. */
    static long threadCpuNs() {
        try {
            return firstNumber(Paths.get("/proc/thread-self/schedstat").toFile());
        } catch (Exception e) {
            throw new IllegalStateException("cannot read /proc/thread-self/schedstat", e);
        }
    }

    /**
     * CPU time of the JVM's JIT compiler threads alive now (ns). HotSpot
     * names them "C1 CompilerThre…" and "C2 CompilerThre…"; with a dynamic
     * number of compiler threads one that ended takes its CPU time with it,
     * so this can undercount.
     */
    static long jitCpuNs() {
        long sum = 0;
        File[] tasks = new File("/proc/self/task").listFiles();
        if (tasks == null) {
            return 0;
        }
        for (File t : tasks) {
            try {
                String comm = new String(Files.readAllBytes(new File(t, "comm").toPath())).trim();
                if (comm.startsWith("C1 Compiler") || comm.startsWith("C2 Compiler")) {
                    sum += firstNumber(new File(t, "schedstat"));
                }
            } catch (Exception e) {
                // The thread ended meanwhile.
            }
        }
        return sum;
    }

    private static long firstNumber(File f) throws java.io.IOException {
        String s = new String(Files.readAllBytes(f.toPath()));
        return Long.parseLong(s.trim().split(" ")[0]);
    }
}
