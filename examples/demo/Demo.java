import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;

/**
 * jtrace's bundled demo: one thread per reason a Java method can be slow
 * while the CPU profile says it is idle. Each method below has one known
 * cause, so the trace shows what jtrace attributes it to.
 */
public class Demo {
    static final Object LOCK = new Object();
    /** Counted down once the holder has the lock: the waiter then surely blocks. */
    static final CountDownLatch HELD = new CountDownLatch(1);
    static volatile long sink;

    /** CPU-bound: more of these run than there are CPUs, so they get preempted. */
    static long crunch(long millis) {
        long end = System.nanoTime() + millis * 1_000_000L;
        long x = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 10_000; i++) {
                x += i * 31 + (x >>> 7);
            }
        }
        sink = x;
        return x;
    }

    /** Holds the lock for a while, so the other thread blocks entering it. */
    static void holdLock(long millis) throws InterruptedException {
        synchronized (LOCK) {
            HELD.countDown();
            Thread.sleep(millis);
        }
    }

    /** Blocks on the contended monitor. */
    static void enterLock() {
        synchronized (LOCK) {
            sink++;
        }
    }

    /** Plain sleep. */
    static void nap(long millis) throws InterruptedException {
        Thread.sleep(millis);
    }

    /** A loopback round-trip to a server that answers after 40 ms. */
    static int fetch(int port) throws Exception {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            OutputStream out = s.getOutputStream();
            out.write("ping\n".getBytes());
            out.flush();
            InputStream in = s.getInputStream();
            int n = 0;
            while (in.read() != '\n') {
                n++;
            }
            return n;
        }
    }

    static void serve(ServerSocket server) {
        try (Socket c = server.accept()) {
            InputStream in = c.getInputStream();
            while (in.read() != '\n') {
                // read the request line
            }
            Thread.sleep(40);
            c.getOutputStream().write("pong\n".getBytes());
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    /** Allocates garbage and asks for a collection. */
    static int churn() {
        List<byte[]> keep = new ArrayList<>();
        for (int i = 0; i < 2_000; i++) {
            keep.add(new byte[16 * 1024]);
            if (keep.size() > 200) {
                keep.clear();
            }
        }
        System.gc();
        return keep.size();
    }

    public static void main(String[] args) throws Exception {
        long start = System.nanoTime();
        List<Thread> threads = new ArrayList<>();
        int crunchers = Runtime.getRuntime().availableProcessors() + 1;
        for (int i = 0; i < crunchers; i++) {
            threads.add(new Thread(() -> crunch(300), "cruncher-" + i));
        }
        threads.add(new Thread(() -> {
            try {
                holdLock(150);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "lock-holder"));
        threads.add(new Thread(() -> {
            try {
                HELD.await(); // the holder has the lock (a sleep raced it on a loaded machine)
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            enterLock();
        }, "lock-waiter"));
        threads.add(new Thread(() -> {
            try {
                nap(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "sleeper"));
        ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        threads.add(new Thread(() -> serve(server), "server"));
        threads.add(new Thread(() -> {
            try {
                System.out.println("fetch read " + fetch(server.getLocalPort()) + " bytes");
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, "client"));
        for (Thread t : threads) {
            t.start();
        }
        churn();
        for (Thread t : threads) {
            t.join();
        }
        server.close();
        System.out.printf("demo done in %d ms%n", (System.nanoTime() - start) / 1_000_000);
    }
}
