import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Ground truth for the agent's blocking, GC, JIT and allocation events
 * (tests/events.rs). Each scenario runs on its own named thread and prints:
 *
 *   TID <thread name> <kernel tid>
 *   MARK <label> <System.nanoTime()>     (CLOCK_MONOTONIC, the trace's clock)
 *   COUNT <label> <n>
 *
 * Usage: java Events <scenario>...  (scenarios below, or "all").
 * Bench scenarios print "BENCH <label> <ns>".
 */
public class Events {
    static final class MonitorLock {}
    static final class WaitLock {}
    static final class TimedLock {}
    static final class Blob {
        final long a, b, c, d;
        Blob(long x) { a = x; b = x + 1; c = x + 2; d = x + 3; }
    }

    static final long MS = 1_000_000L;
    static volatile boolean flag;
    static volatile long sink;

    static String tid() throws Exception {
        String s = Files.readSymbolicLink(Paths.get("/proc/thread-self")).toString();
        return s.substring(s.lastIndexOf('/') + 1);
    }

    static void mark(String label) {
        System.out.println("MARK " + label + " " + System.nanoTime());
    }

    interface Body { void run() throws Exception; }

    /** Runs body on a new thread called name, which prints its tid first; waits for it. */
    static void onThread(String name, Body body) throws Exception {
        Thread t = new Thread(() -> {
            try {
                System.out.println("TID " + name + " " + tid());
                body.run();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, name);
        t.start();
        t.join();
    }

    static Thread started(String name, Body body) {
        Thread t = new Thread(() -> {
            try {
                System.out.println("TID " + name + " " + tid());
                body.run();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, name);
        t.start();
        return t;
    }

    /** "mon-blocked" blocks ~100 ms entering a monitor "mon-holder" holds. */
    static void monitor() throws Exception {
        final MonitorLock lock = new MonitorLock();
        flag = false;
        Thread holder = started("mon-holder", () -> {
            synchronized (lock) {
                flag = true;
                // Hold it 100 ms from when the other thread is blocked on it:
                // on a loaded machine that thread may get a CPU late.
                while (monBlocked == null || monBlocked.getState() != Thread.State.BLOCKED) {
                    Thread.onSpinWait();
                }
                mark("mon-hold");
                long end = System.nanoTime() + 100 * MS;
                while (System.nanoTime() < end) { sink++; }   // hold it, on CPU
                mark("mon-release");
            }
        });
        monBlocked = started("mon-blocked", () -> {
            while (!flag) { Thread.onSpinWait(); }
            mark("mon-contend");
            synchronized (lock) { sink++; }
            mark("mon-entered");
        });
        holder.join();
        monBlocked.join();
    }

    static volatile Thread monBlocked;

    /** "waiter" waits ~100 ms until notified; "timed-waiter" waits 50 ms and times out. */
    static void waits() throws Exception {
        final WaitLock w = new WaitLock();
        flag = false;
        Thread waiter = started("waiter", () -> {
            synchronized (w) {
                flag = true;
                mark("wait-begin");
                w.wait();
                mark("wait-end");
            }
        });
        while (!flag) { Thread.onSpinWait(); }
        synchronized (w) { sink++; }   // the waiter is in wait() now
        Thread.sleep(100);
        synchronized (w) { w.notify(); }
        waiter.join();
        final TimedLock t = new TimedLock();
        onThread("timed-waiter", () -> {
            synchronized (t) { t.wait(50); }
        });
    }

    static void park() throws Exception {
        onThread("parker", () -> {
            mark("park-begin");
            LockSupport.parkNanos(100 * MS);
            mark("park-end");
        });
    }

    static void reentrant() throws Exception {
        final ReentrantLock lock = new ReentrantLock();
        flag = false;
        Thread holder = started("rl-holder", () -> {
            lock.lock();
            try {
                flag = true;
                long end = System.nanoTime() + 100 * MS;
                while (System.nanoTime() < end) { sink++; }
            } finally {
                lock.unlock();
            }
        });
        Thread blocked = started("rl-blocked", () -> {
            while (!flag) { Thread.onSpinWait(); }
            mark("rl-lock");
            lock.lock();
            lock.unlock();
            mark("rl-locked");
        });
        holder.join();
        blocked.join();
    }

    static void sleep() throws Exception {
        onThread("sleeper", () -> {
            mark("sleep-begin");
            Thread.sleep(100);
            mark("sleep-end");
        });
    }

    static int hotParks(int n) {
        int i = 0;
        for (; i < n; i++) {
            LockSupport.parkNanos(1);
        }
        return i;
    }

    /** 30k parks in a loop hot enough to be compiled by C1 and C2. */
    static void hotpark() throws Exception {
        onThread("hot-parker", () -> {
            int n = 0;
            // 3000 calls of 10: enough invocations and back-edges for C1 and
            // then C2 to compile hotParks (inlining LockSupport.parkNanos)
            // well before the end.
            for (int round = 0; round < 3000; round++) {
                n += hotParks(10);
            }
            System.out.println("COUNT hot-parks " + n);
        });
    }

    static void gc() throws Exception {
        onThread("gc-caller", () -> {
            mark("gc-begin");
            System.gc();
            mark("gc-end");
        });
    }

    static long hot(long x) {
        return (x * 31 + 7) ^ (x >>> 3);
    }

    static void jit() throws Exception {
        onThread("jit", () -> {
            long s = 0;
            for (int i = 0; i < 200_000; i++) { s += hot(i); }
            sink = s;
            Thread.sleep(200);   // let the compiler threads finish and report
        });
    }

    static void alloc() throws Exception {
        onThread("allocator", () -> { // alloc-site: this line and the next five
            List<Object> keep = new ArrayList<>();
            for (int i = 0; i < 200_000; i++) {
                keep.add(new Blob(i));
                keep.add(new byte[100]);
                if (keep.size() > 10_000) keep.clear();
            }
            sink = keep.size();
        });
    }

    /** A CPU-bound loop (no allocation, no calls out of compiled code). */
    static long spin(long n) {
        long s = 0;
        for (long i = 0; i < n; i++) { s += (i * i) ^ (s >>> 7); }
        return s;
    }

    static void bench() throws Exception {
        onThread("bench", () -> {
            for (int i = 0; i < 20_000; i++) { sink += spin(1_000); }   // compiled by C2
            // The thread's own CPU time too: on a loaded VM the wall time
            // includes run-queue waits and the hypervisor's steal.
            java.lang.management.ThreadMXBean mx = java.lang.management.ManagementFactory.getThreadMXBean();
            long best = Long.MAX_VALUE, bestCpu = Long.MAX_VALUE;
            for (int i = 0; i < 10; i++) {
                long t = System.nanoTime(), c = mx.getCurrentThreadCpuTime();
                sink += spin(50_000_000L);
                bestCpu = Math.min(bestCpu, mx.getCurrentThreadCpuTime() - c);
                best = Math.min(best, System.nanoTime() - t);
            }
            System.out.println("BENCH cpu-loop " + best);
            System.out.println("BENCH cpu-loop-cpu " + bestCpu);
            long t0;
            Thread me = Thread.currentThread();
            for (int i = 0; i < 100_000; i++) { LockSupport.unpark(me); LockSupport.park(); }
            t0 = System.nanoTime();
            for (int i = 0; i < 1_000_000; i++) { LockSupport.unpark(me); LockSupport.park(); }
            System.out.println("BENCH unpark-park-1M " + (System.nanoTime() - t0));
            t0 = System.nanoTime();
            for (int i = 0; i < 20_000; i++) { LockSupport.parkNanos(1); }
            System.out.println("BENCH parkNanos1-20k " + (System.nanoTime() - t0));
            t0 = System.nanoTime();
            for (int i = 0; i < 100_000; i++) { Thread.sleep(0); }
            System.out.println("BENCH sleep0-100k " + (System.nanoTime() - t0));
        });
    }

    public static void main(String[] args) throws Exception {
        System.out.println("TID main " + tid());
        List<String> todo = new ArrayList<>(List.of(args));
        if (todo.remove("all")) {
            todo.addAll(List.of("monitor", "waits", "park", "reentrant", "sleep", "hotpark", "gc", "jit", "alloc"));
        }
        for (String s : todo) {
            switch (s) {
                case "monitor": monitor(); break;
                case "waits": waits(); break;
                case "park": park(); break;
                case "reentrant": reentrant(); break;
                case "sleep": sleep(); break;
                case "hotpark": hotpark(); break;
                case "gc": gc(); break;
                case "jit": jit(); break;
                case "alloc": alloc(); break;
                case "bench": bench(); break;
                default: throw new IllegalArgumentException(s);
            }
        }
        System.out.println("DONE");
    }
}
