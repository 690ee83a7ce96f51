import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.ThreadFactory;

/**
 * Ground truth for I/O behind a starved poller (JDK 21 and later; compiled
 * for Java 11, so virtual threads are made through reflection). Run with
 * one carrier and one read poller:
 * -Djdk.virtualThreadScheduler.parallelism=1
 * -Djdk.virtualThreadScheduler.maxPoolSize=1 -Djdk.readPollers=1.
 * Usage: VirtualPoller park|yield <delayMs> <spinMs>
 *
 * Virtual thread "reader" reads a loopback socket in {@link #receive}: no
 * data yet, so it parks until the JDK's read poller sees the socket ready
 * and unparks it. Virtual thread "spinner" spins spinMs in {@link #spin}
 * on the only carrier and never yields it; delayMs after it began,
 * platform thread "writer" writes the reader's data in {@link #send}.
 * Where the poller is a virtual thread (JDK 25's default; JDK 21's pollers
 * are platform threads) it needs the carrier to unpark the reader: it
 * waits for it until the spin ends, and the reader with it.
 *
 * park: the spinner starts once the reader is parked; the poller is parked
 * too (on JDK 25 behind the JDK's MasterPoller, a platform thread, which
 * unparks it when the data comes).
 * yield: the spinner is a request of its own: it receives its data on a
 * second socket (written first) and then spins. The poller that unparked
 * it yields the carrier after that poll (JDK 25's sub-pollers do) and
 * waits behind the spin without being parked.
 *
 * A first exchange (in {@link #warmUp}) starts the pollers beforehand.
 * Prints "received N bytes in M ms" (the reader's measure of receive's
 * wall), the platform poller threads it saw ("pollers: ..."), and "wrote at
 * W ns, spun until S ns" (System.nanoTime(), CLOCK_MONOTONIC): from W to S
 * the reader's data was there and no poller could hand it over.
 */
public class VirtualPoller {
    static volatile long sink;
    static volatile boolean spinning;
    /** System.nanoTime() (CLOCK_MONOTONIC) as the spin ended. */
    static volatile long spunUntil;

    static int receive(InputStream in, byte[] buf) throws Exception {
        return in.read(buf);
    }

    static void send(OutputStream out, byte[] data) throws Exception {
        out.write(data);
        out.flush();
    }

    static void spin(long ms) {
        spinning = true;
        long end = System.nanoTime() + ms * 1_000_000L;
        long x = 1;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
        }
        sink = x;
        spunUntil = System.nanoTime();
    }

    static void warmUp(InputStream in, OutputStream out) throws Exception {
        Thread reader = virtualFactory("warm-reader").newThread(() -> {
            try {
                if (in.read(new byte[16]) <= 0) {
                    throw new IllegalStateException("warm-up read");
                }
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        reader.start();
        waitParked(reader);
        out.write(new byte[] {1});
        out.flush();
        reader.join();
    }

    static void waitParked(Thread t) throws InterruptedException {
        while (t.getState() != Thread.State.WAITING) {
            Thread.sleep(1);
        }
    }

    static ThreadFactory virtualFactory(String name) throws Exception {
        Method ofVirtual = Thread.class.getMethod("ofVirtual");
        Object builder = ofVirtual.invoke(null);
        Class<?> b = Class.forName("java.lang.Thread$Builder");
        builder = b.getMethod("name", String.class).invoke(builder, name);
        return (ThreadFactory) b.getMethod("factory").invoke(builder);
    }

    public static void main(String[] args) throws Exception {
        boolean yield = args[0].equals("yield");
        long delayMs = Long.parseLong(args[1]);
        long spinMs = Long.parseLong(args[2]);
        InetAddress lo = InetAddress.getLoopbackAddress();
        try (ServerSocket server = new ServerSocket(0, 2, lo);
                Socket client = new Socket(lo, server.getLocalPort());
                Socket served = server.accept();
                Socket client2 = new Socket(lo, server.getLocalPort());
                Socket served2 = server.accept()) {
            InputStream in = served.getInputStream();
            OutputStream out = client.getOutputStream();
            warmUp(in, out);
            // The pollers park again once the warm-up's data is read.
            Thread.sleep(50);
            final long[] got = new long[2];
            final long[] wroteAt = new long[1];
            Thread reader = virtualFactory("reader").newThread(() -> {
                try {
                    long t0 = System.nanoTime();
                    got[0] = receive(in, new byte[64]);
                    got[1] = System.nanoTime() - t0;
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            InputStream spinnerIn = served2.getInputStream();
            Thread spinner = virtualFactory("spinner").newThread(() -> {
                try {
                    if (yield && receive(spinnerIn, new byte[64]) <= 0) {
                        throw new IllegalStateException("spinner's read");
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
                spin(spinMs);
            });
            OutputStream spinnerOut = client2.getOutputStream();
            Thread writer = new Thread(() -> {
                try {
                    if (yield) {
                        send(spinnerOut, "go".getBytes());
                    }
                    while (!spinning) {
                        Thread.sleep(1);
                    }
                    Thread.sleep(delayMs);
                    send(out, "data".getBytes());
                    wroteAt[0] = System.nanoTime();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, "writer");
            reader.start();
            // The spinner takes the carrier only once the reader is parked.
            waitParked(reader);
            if (yield) {
                spinner.start();
                waitParked(spinner);
            }
            Thread.sleep(20);
            writer.start();
            if (!yield) {
                spinner.start();
            }
            reader.join();
            spinner.join();
            writer.join();
            StringBuilder pollers = new StringBuilder();
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                if (t.getName().contains("Poller")) {
                    pollers.append(' ').append(t.getName());
                }
            }
            System.out.println("pollers:" + pollers);
            System.out.println("received " + got[0] + " bytes in " + got[1] / 1_000_000 + " ms");
            System.out.println("wrote at " + wroteAt[0] + " ns, spun until " + spunUntil + " ns");
        }
    }
}
