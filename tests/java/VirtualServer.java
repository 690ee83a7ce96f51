import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URL;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A real virtual-thread web server: the JDK's own HttpServer with a
 * virtual-thread-per-task executor (JDK 21 and later; compiled for Java
 * 11, so the executor is made through reflection), under a load generator
 * of platform threads on loopback. Routes: /sleep sleeps SLEEP ms,
 * /lock holds one shared {@code synchronized} monitor (of class
 * {@link Ledger}) for HOLD ms, /spin computes for about SPIN ms.
 * Usage: VirtualServer <requestsPerRoute> <clients> [sleepMs holdMs spinMs]
 * Prints "served N" with the number of requests answered.
 */
public class VirtualServer {
    /** The shared monitor's class: what a monitor wait must name. */
    static final class Ledger {
        long entries;
    }

    static final Ledger LEDGER = new Ledger();
    static long sleepMs = 20;
    static long holdMs = 5;
    static long spinMs = 5;
    static volatile long sink;
    static final AtomicLong served = new AtomicLong();

    static void sleepRoute() throws InterruptedException {
        Thread.sleep(sleepMs);
    }

    static void lockRoute() throws InterruptedException {
        synchronized (LEDGER) {
            LEDGER.entries++;
            long end = System.nanoTime() + holdMs * 1_000_000L;
            while (System.nanoTime() < end) {
                sink++;
            }
        }
    }

    static void spinRoute() {
        long end = System.nanoTime() + spinMs * 1_000_000L;
        long x = 1;
        while (System.nanoTime() < end) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink = x;
    }

    static void handle(HttpExchange ex) {
        try {
            String path = ex.getRequestURI().getPath();
            if (path.equals("/sleep")) {
                sleepRoute();
            } else if (path.equals("/lock")) {
                lockRoute();
            } else {
                spinRoute();
            }
            byte[] body = "ok\n".getBytes();
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(body);
            }
            served.incrementAndGet();
        } catch (Exception e) {
            throw new RuntimeException(e);
        } finally {
            ex.close();
        }
    }

    static void get(int port, String route) throws Exception {
        URL url = new URL("http://127.0.0.1:" + port + route);
        HttpURLConnection c = (HttpURLConnection) url.openConnection();
        try (InputStream in = c.getInputStream()) {
            while (in.read() >= 0) {
                // Drain the body.
            }
        }
        c.disconnect();
    }

    public static void main(String[] args) throws Exception {
        int perRoute = Integer.parseInt(args[0]);
        int clients = Integer.parseInt(args[1]);
        if (args.length > 4) {
            sleepMs = Long.parseLong(args[2]);
            holdMs = Long.parseLong(args[3]);
            spinMs = Long.parseLong(args[4]);
        }
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 128);
        ExecutorService vthreads =
                (ExecutorService) Executors.class.getMethod("newVirtualThreadPerTaskExecutor").invoke(null);
        server.setExecutor(vthreads);
        server.createContext("/", VirtualServer::handle);
        server.start();
        int port = server.getAddress().getPort();
        String[] routes = {"/sleep", "/lock", "/spin"};
        Thread[] load = new Thread[clients];
        for (int i = 0; i < clients; i++) {
            final int k = i;
            load[i] = new Thread(() -> {
                try {
                    for (int n = k; n < perRoute * routes.length; n += clients) {
                        get(port, routes[n % routes.length]);
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, "client-" + i);
            load[i].start();
        }
        for (Thread t : load) {
            t.join();
        }
        server.stop(0);
        vthreads.shutdown();
        System.out.println("served " + served.get());
    }
}
