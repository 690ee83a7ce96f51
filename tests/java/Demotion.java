import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;

/**
 * Adaptive demotion's workload: a hot tiny method ({@code tiny}), a hot
 * method that sleeps in one call of 1024 ({@code napper}: a JVM-level
 * block) and one that waits for a loopback socket's echo in one call of
 * 256 ({@code socketWait}: a kernel-level block the JVM does not report;
 * the echo answers after 3 ms).
 * All three are short on average. Runs for the given milliseconds, then
 * prints how often each was called. The methods are in their own class:
 * retransforming a class leaves the frames running in it on the old code
 * (interpreted) until they return, so the loop must not be in it.
 */
public class Demotion {
    static long sink;

    static final class Work {

        // A call keeps it from being trivial (never instrumented: the
        // trivial-method rule, tests/trivial.rs): it must be demoted.
        static int tiny(int i) {
        // A loop of two rounds: short, but not a forwarder the trivial rule skips.
        for (int k = 0; k < 2; k++) {
            i = Integer.rotateLeft(i, 3) * 31 + 7;
        }
        return i;
    }

    static void napper(int i) throws InterruptedException {
        if ((i & 1023) == 0) {
            Thread.sleep(1);
        }
        sink += i;
    }

    static void socketWait(int i, InputStream in, OutputStream out) throws Exception {
        if ((i & 255) == 128) {
            out.write(1);
            out.flush();
            if (in.read() < 0) {
                throw new IllegalStateException("echo closed");
            }
        }
        sink += i;
    }
    }

    public static void main(String[] args) throws Exception {
        long millis = Long.parseLong(args[0]);
        ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        Thread echo = new Thread(() -> {
            try (Socket s = server.accept()) {
                s.setTcpNoDelay(true);
                InputStream in = s.getInputStream();
                OutputStream out = s.getOutputStream();
                int b;
                while ((b = in.read()) >= 0) {
                    // A wait longer than most preemptions on a loaded machine.
                    Thread.sleep(3);
                    out.write(b);
                    out.flush();
                }
            } catch (Exception e) {
                // The client closed: done.
            }
        }, "echo");
        echo.setDaemon(true);
        echo.start();
        Socket client = new Socket(server.getInetAddress(), server.getLocalPort());
        client.setTcpNoDelay(true);
        InputStream in = client.getInputStream();
        OutputStream out = client.getOutputStream();
        long end = System.nanoTime() + millis * 1_000_000L;
        long tinyCalls = 0;
        int i = 0;
        while (System.nanoTime() < end) {
            for (int k = 0; k < 200; k++) {
                sink += Work.tiny(k);
            }
            tinyCalls += 200;
            Work.napper(i);
            Work.socketWait(i, in, out);
            i++;
        }
        client.close();
        System.out.println("tiny " + tinyCalls + " napper " + i + " socketWait " + i + " sink " + sink);
    }
}
