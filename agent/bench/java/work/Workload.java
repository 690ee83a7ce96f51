package work;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import infra.Store;

/**
 * A request-processing workload for the tracing-overhead benchmark
 * (agent/bench/workload.sh). Usage: java work.Workload [threads] [requests] [body words]
 *
 * A pool of worker threads takes request numbers from a shared counter and
 * handles each one: build and parse a request line, validate it, hash its
 * body (SHA-256), look it up in and update a shared LRU cache (a lock,
 * package infra), aggregate per-user statistics (a concurrent map, package
 * infra) and render a response (sorting a small list). The methods of
 * package `work` are the traced ones: 6 calls per request. The body size
 * (default 200 words of 8 bytes) sets the work per call. A warm-up run of a
 * quarter of the requests comes first; then prints "ELAPSED_MS <ms>" for the
 * measured run, "WORKER_CPU_MS <ms>" (CPU time of its worker threads) and a
 * checksum.
 */
public final class Workload {
    static final AtomicLong CHECKSUM = new AtomicLong();
    /** CPU time of the worker threads of the last run, ns. */
    static final AtomicLong WORKER_CPU = new AtomicLong();

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 4;
        int requests = args.length > 1 ? Integer.parseInt(args[1]) : 300_000;
        int words = args.length > 2 ? Integer.parseInt(args[2]) : 200;
        Store store = new Store(4096);
        run(threads, requests / 4, store, words);
        WORKER_CPU.set(0);
        long t0 = System.nanoTime();
        run(threads, requests, store, words);
        long t1 = System.nanoTime();
        System.out.printf("ELAPSED_MS %.1f%n", (t1 - t0) / 1e6);
        System.out.printf("WORKER_CPU_MS %.1f%n", WORKER_CPU.get() / 1e6);
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
            String s = new String(Files.readAllBytes(Paths.get("/proc/thread-self/schedstat")));
            return Long.parseLong(s.trim().split(" ")[0]);
        } catch (Exception e) {
            throw new IllegalStateException("cannot read /proc/thread-self/schedstat", e);
        }
    }
}
