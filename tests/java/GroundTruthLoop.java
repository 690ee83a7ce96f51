import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.CountDownLatch;

/**
 * GroundTruth's sleep, monitor and socket scenarios over and over, so that
 * a `jtrace attach` catches whole calls of each while it records: each
 * round calls GroundTruth.sleepFor (Thread.sleep of the delay),
 * GroundTruth.enterMonitor (the monitor held by "releaser" for the delay)
 * and GroundTruth.readLateReply (a loopback server, "answerer", replies
 * after the delay). Prints "ready" once the server is up.
 * Usage: GroundTruthLoop <delayMs> <seconds to run>
 */
public class GroundTruthLoop {
    public static void main(String[] args) throws Exception {
        GroundTruth.delay = Long.parseLong(args[0]);
        long end = System.nanoTime() + Long.parseLong(args[1]) * 1_000_000_000L;
        ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        Thread answerer = new Thread(() -> {
            while (true) {
                try (Socket c = server.accept()) {
                    InputStream in = c.getInputStream();
                    in.read();
                    GroundTruth.sleepQuietly(GroundTruth.delay);
                    OutputStream out = c.getOutputStream();
                    out.write('!');
                    out.flush();
                } catch (Exception e) {
                    return;
                }
            }
        }, "answerer");
        answerer.setDaemon(true);
        answerer.start();
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            GroundTruth.sleepFor();
            contendedMonitor();
            GroundTruth.readLateReply(server.getLocalPort());
            Thread.sleep(20);
        }
        server.close();
    }

    /** As GroundTruth's "monitor" scenario. */
    static void contendedMonitor() throws InterruptedException {
        CountDownLatch held = new CountDownLatch(1);
        Thread main = Thread.currentThread();
        Thread releaser = new Thread(() -> {
            synchronized (GroundTruth.MONITOR) {
                held.countDown();
                while (main.getState() != Thread.State.BLOCKED) {
                    Thread.onSpinWait();
                }
                GroundTruth.sleepQuietly(GroundTruth.delay);
            }
        }, "releaser");
        releaser.start();
        held.await();
        GroundTruth.enterMonitor();
        releaser.join();
    }
}
