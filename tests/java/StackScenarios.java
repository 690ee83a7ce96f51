import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.locks.LockSupport;

/**
 * One thread per way of blocking, each blocking inside a method of its own
 * (tests/stacks.rs: with no method traced, the blocked time must land
 * under stacks that contain that method). Usage: java StackScenarios <ms>
 * [spin]; with "spin", a thread "spin" also burns CPU in spinHere half of
 * the time (tests/pprof_export.rs: the CPU samples name it).
 */
public class StackScenarios {
    static final Object LOCK = new Object();
    static final Object WAITED = new Object();
    static volatile boolean done;
    static volatile long sink;

    static void sleepHere() throws Exception {
        Thread.sleep(20);
    }

    static void monitorHere() {
        synchronized (LOCK) {
            LOCK.hashCode();
        }
    }

    static void holdLock() throws Exception {
        synchronized (LOCK) {
            Thread.sleep(20);
        }
    }

    static void waitHere() throws Exception {
        synchronized (WAITED) {
            WAITED.wait(20);
        }
    }

    static void parkHere() {
        LockSupport.parkNanos(20_000_000L);
    }

    static int socketHere(InputStream in) throws Exception {
        return in.read();
    }

    static void fileHere(FileOutputStream out) throws Exception {
        out.write(new byte[4096]);
        out.getFD().sync();
    }

    /** CPU-bound for `nanos` of wall time. */
    static long spinHere(long nanos) {
        long end = System.nanoTime() + nanos;
        long x = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) x += i ^ (x << 1);
        }
        return x;
    }

    /** Compiled once warm (C2, or C1 with -XX:TieredStopAtLevel=1), with jitMiddle inlined. */
    static void jitOuter(long nanos) throws Exception {
        jitMiddle(nanos);
    }

    static void jitMiddle(long nanos) throws Exception {
        LockSupport.parkNanos(nanos);
    }

    /**
     * Warm-up: enough calls for the JIT to compile jitOuter, then parks.
     * Every 64th warm-up call parks 1 µs: parkNanos(0) returns at once, and
     * code compiled from calls that never park would be deoptimised (an
     * uncommon trap) at the first real park, and not compiled again.
     */
    static void warmThenPark() throws Exception {
        for (int i = 0; i < 200_000 && !done; i++) jitOuter((i & 63) == 0 ? 1_000 : 0);
        while (!done) jitOuter(20_000_000L);
    }

    interface Body {
        void run() throws Exception;
    }

    static Thread start(String name, Body body) {
        Thread t = new Thread(() -> {
            try {
                while (!done) body.run();
            } catch (Exception e) {
                if (!done) throw new RuntimeException(e);
            }
        }, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        long ms = Long.parseLong(args[0]);
        ServerSocket server = new ServerSocket(0);
        Socket client = new Socket("127.0.0.1", server.getLocalPort());
        Socket accepted = server.accept();
        InputStream in = accepted.getInputStream();
        OutputStream out = client.getOutputStream();
        Path file = Files.createTempFile("stacks", ".bin");
        FileOutputStream fos = new FileOutputStream(file.toFile());
        start("sleep", StackScenarios::sleepHere);
        start("holder", StackScenarios::holdLock);
        start("monitor", StackScenarios::monitorHere);
        start("wait", StackScenarios::waitHere);
        start("park", StackScenarios::parkHere);
        start("socket", () -> socketHere(in));
        start("writer", () -> {
            Thread.sleep(20);
            out.write(1);
            out.flush();
        });
        start("file", () -> fileHere(fos));
        start("jit", StackScenarios::warmThenPark);
        if (args.length > 1 && args[1].equals("spin")) {
            start("spin", () -> {
                sink += spinHere(10_000_000L);
                Thread.sleep(10);
            });
        }
        Thread.sleep(ms);
        done = true;
        fos.close();
        Files.deleteIfExists(file);
        System.out.println("DONE");
    }
}
