import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.CountDownLatch;

/**
 * Critical paths for `jtrace why` (tests/why_e2e.rs).
 *
 * <p>{@code server PORTFILE [DELAY]} and {@code client PORTFILE}, two JVMs over
 * loopback TCP: in the client, thread chain-b holds a monitor across a
 * request that the server's thread chain-c answers after sleeping DELAY ms,
 * while chain-a waits for the monitor in {@code a()}: a's slowest call is
 * monitor → held by chain-b (socket) → answered by chain-c (sleep). Its
 * other calls find the monitor free.
 *
 * <p>{@code latch - [DELAY]}: one JVM; chain-a parks in {@code awaiter()} on a latch that
 * chain-b counts down after sleeping DELAY ms: park → unparked by chain-b
 * (sleep). DELAY defaults to 100.
 *
 * <p>{@code timed} (run on one CPU): chain-a parks in {@code nap()} with a
 * timeout nobody cuts short while chain-b spins: the timer that ends each
 * park interrupts chain-b, which is not its waker.
 */
public class WhyChain {
    static final Object LOCK = new Object();
    static final int FAST = 20;
    static long delay = 100;

    public static void main(String[] args) throws Exception {
        if (args.length > 2) {
            delay = Long.parseLong(args[2]);
        }
        // Classic switch: the test programs are compiled for Java 11.
        switch (args[0]) {
            case "server":
                server(Path.of(args[1]));
                break;
            case "client":
                client(Path.of(args[1]));
                break;
            case "latch":
                latch();
                break;
            case "timed":
                timed();
                break;
            default:
                throw new IllegalArgumentException(args[0]);
        }
    }

    // ---- server JVM -------------------------------------------------------
    static void server(Path portFile) throws Exception {
        try (ServerSocket ss = new ServerSocket(0, 5, InetAddress.getLoopbackAddress())) {
            Path tmp = Path.of(portFile + ".tmp");
            Files.writeString(tmp, Integer.toString(ss.getLocalPort()));
            Files.move(tmp, portFile, StandardCopyOption.ATOMIC_MOVE);
            Thread t = new Thread(() -> {
                try (Socket s = ss.accept();
                     BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream()));
                     PrintWriter out = new PrintWriter(s.getOutputStream(), true)) {
                    String line;
                    while ((line = in.readLine()) != null) {
                        c(out, line);
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, "chain-c");
            t.start();
            t.join();
        }
    }

    static void c(PrintWriter out, String line) throws InterruptedException {
        if (line.equals("slow")) {
            Thread.sleep(delay);
        }
        out.println("ok " + line);
    }

    // ---- client JVM -------------------------------------------------------
    static void client(Path portFile) throws Exception {
        long until = System.nanoTime() + 30_000_000_000L;
        while (!Files.exists(portFile)) {
            if (System.nanoTime() > until) {
                throw new IllegalStateException("no server");
            }
            Thread.sleep(5);
        }
        int port = Integer.parseInt(Files.readString(portFile).trim());
        CountDownLatch contend = new CountDownLatch(1);
        CountDownLatch fastDone = new CountDownLatch(1);
        Thread b = new Thread(() -> {
            try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port);
                 BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream()));
                 PrintWriter out = new PrintWriter(s.getOutputStream(), true)) {
                for (int i = 0; i < FAST; i++) {
                    synchronized (LOCK) {
                        b(in, out, "fast");
                    }
                }
                fastDone.await();
                synchronized (LOCK) {
                    contend.countDown();
                    // Let chain-a reach the monitor before the slow request.
                    Thread.sleep(2);
                    b(in, out, "slow");
                }
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, "chain-b");
        Thread a = new Thread(() -> {
            try {
                for (int i = 0; i < FAST; i++) {
                    a();
                }
                fastDone.countDown();
                contend.await();
                a();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, "chain-a");
        b.start();
        a.start();
        a.join();
        b.join();
    }

    static void b(BufferedReader in, PrintWriter out, String what) throws Exception {
        out.println(what);
        if (in.readLine() == null) {
            throw new IllegalStateException("server closed");
        }
    }

    static long counter;

    static void a() {
        synchronized (LOCK) {
            counter++;
        }
    }

    // ---- one JVM: park --------------------------------------------------
    static void latch() throws Exception {
        CountDownLatch l = new CountDownLatch(1);
        Thread b = new Thread(() -> {
            try {
                sleeper(l);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, "chain-b");
        Thread a = new Thread(() -> {
            try {
                awaiter(l);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, "chain-a");
        a.start();
        b.start();
        a.join();
        b.join();
    }

    static void awaiter(CountDownLatch l) throws InterruptedException {
        l.await();
    }

    static void sleeper(CountDownLatch l) throws InterruptedException {
        Thread.sleep(delay);
        l.countDown();
    }

    // ---- one JVM: timed parks while another thread spins ------------------
    static volatile boolean done;

    static void timed() throws Exception {
        Thread b = new Thread(() -> {
            long x = 0;
            while (!done) {
                x += System.nanoTime() & 1;
            }
            counter = x;
        }, "chain-b");
        Thread a = new Thread(() -> {
            for (int i = 0; i < 10; i++) {
                nap();
            }
        }, "chain-a");
        b.start();
        a.start();
        a.join();
        done = true;
        b.join();
    }

    static void nap() {
        java.util.concurrent.locks.LockSupport.parkNanos(100_000_000L); // far above run-queue waits on a loaded machine
    }
}
