import java.io.File;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.ReentrantLock;
import java.util.zip.Deflater;
import java.util.zip.Inflater;

/**
 * Ground truth for gap attribution: each scenario method has one injected
 * cause of a known size (DELAY ms), released by a thread with a known name.
 * Usage: GroundTruth <scenario> [delayMs]
 */
public class GroundTruth {
    static final Object MONITOR = new Object();
    static final Object WAITER = new Object();
    static final ReentrantLock LOCK = new ReentrantLock();
    static volatile long sink;
    static long delay = 100;

    static void sleepQuietly(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    /** sleep: Thread.sleep(delay). */
    static void sleepFor() {
        sleepQuietly(delay);
    }

    /** monitor: blocks entering MONITOR, which "releaser" holds for delay ms. */
    static void enterMonitor() {
        synchronized (MONITOR) {
            sink++;
        }
    }

    /** wait: Object.wait until "releaser" notifies after delay ms. */
    static void waitForNotify(CountDownLatch ready) throws InterruptedException {
        synchronized (WAITER) {
            ready.countDown();
            WAITER.wait();
        }
    }

    /** park: ReentrantLock.lock while "releaser" holds it for delay ms. */
    static void lockReentrant() {
        LOCK.lock();
        LOCK.unlock();
    }

    /** socket: read a reply that the loopback server sends after delay ms. */
    static int readLateReply(int port) throws Exception {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            s.getOutputStream().write('?');
            return s.getInputStream().read();
        }
    }

    /** file: write 64 MiB and fsync it. */
    static void writeAndSync(File f) throws Exception {
        byte[] block = new byte[1 << 20];
        try (FileOutputStream out = new FileOutputStream(f)) {
            for (int i = 0; i < 64; i++) {
                block[0] = (byte) i;
                out.write(block);
            }
            out.getFD().sync();
        }
    }

    /** gc: an explicit full collection with a live heap to trace. */
    static void collect() {
        Object[] live = new Object[200_000];
        for (int i = 0; i < live.length; i++) {
            live[i] = new byte[64];
        }
        System.gc();
        sink += live.length;
    }

    /** zlib: inflate through libz (an interposed library call). */
    static int inflateBlock() throws Exception {
        byte[] data = new byte[4 << 20];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i % 251);
        }
        Deflater d = new Deflater();
        d.setInput(data);
        d.finish();
        byte[] comp = new byte[data.length];
        int n = d.deflate(comp);
        d.end();
        Inflater inf = new Inflater();
        inf.setInput(comp, 0, n);
        byte[] out = new byte[data.length];
        int m = inf.inflate(out);
        inf.end();
        return m;
    }

    public static void main(String[] args) throws Exception {
        String scenario = args[0];
        if (args.length > 1) {
            delay = Long.parseLong(args[1]);
        }
        switch (scenario) {
            case "sleep":
                sleepFor();
                break;
            case "monitor": {
                CountDownLatch held = new CountDownLatch(1);
                Thread main = Thread.currentThread();
                Thread releaser = new Thread(() -> {
                    synchronized (MONITOR) {
                        held.countDown();
                        // The delay runs from when main is blocked here: on a
                        // loaded machine main may get a CPU late.
                        while (main.getState() != Thread.State.BLOCKED) {
                            Thread.onSpinWait();
                        }
                        sleepQuietly(delay);
                    }
                }, "releaser");
                releaser.start();
                held.await();
                enterMonitor();
                releaser.join();
                break;
            }
            case "wait": {
                CountDownLatch ready = new CountDownLatch(1);
                Thread releaser = new Thread(() -> {
                    try {
                        ready.await();
                    } catch (InterruptedException e) {
                        throw new RuntimeException(e);
                    }
                    sleepQuietly(delay);
                    synchronized (WAITER) {
                        WAITER.notifyAll();
                    }
                }, "releaser");
                releaser.start();
                waitForNotify(ready);
                releaser.join();
                break;
            }
            case "park": {
                CountDownLatch held = new CountDownLatch(1);
                Thread releaser = new Thread(() -> {
                    LOCK.lock();
                    held.countDown();
                    while (!LOCK.hasQueuedThreads()) { // main waits for the lock
                        Thread.onSpinWait();
                    }
                    sleepQuietly(delay);
                    LOCK.unlock();
                }, "releaser");
                releaser.start();
                held.await();
                lockReentrant();
                releaser.join();
                break;
            }
            case "socket": {
                ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
                Thread releaser = new Thread(() -> {
                    try (Socket c = server.accept()) {
                        InputStream in = c.getInputStream();
                        in.read();
                        sleepQuietly(delay);
                        OutputStream out = c.getOutputStream();
                        out.write('!');
                        out.flush();
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                }, "releaser");
                releaser.start();
                readLateReply(server.getLocalPort());
                releaser.join();
                server.close();
                break;
            }
            case "file": {
                File dir = args.length > 2 ? new File(args[2]) : null;
                File f = File.createTempFile("jtrace-gt", ".bin", dir);
                try {
                    writeAndSync(f);
                } finally {
                    f.delete();
                }
                break;
            }
            case "gc":
                collect();
                break;
            case "zlib":
                System.out.println("inflated " + inflateBlock());
                break;
            default:
                System.err.println("unknown scenario " + scenario);
                System.exit(2);
        }
        System.out.println("scenario " + scenario + " done");
    }
}
