import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Ground truth for virtual threads (JDK 21 and later; compiled for Java 11,
 * so virtual threads are made through reflection). Usage:
 * VirtualWork <threads> <delayMs> [pinned]
 *
 * Each of the virtual threads "v-0", "v-1", ... does, with the delay:
 * sleepStep (Thread.sleep), lockStep (a ReentrantLock that the platform
 * thread "holder" holds for the delay once every virtual thread waits for
 * it) and socketStep (a loopback round trip whose reply the platform
 * thread "replier" sends the delay after the request came).
 * With "pinned": pinnedStep instead, Thread.sleep inside synchronized,
 * which pins the virtual thread to its carrier on JDK 21.
 * With "highids": the same steps, on virtual threads whose Java ids are
 * past 2^26, as in a server that has made 67 M threads (the JVM's next
 * thread id is moved on first; needs --add-opens java.base/java.lang).
 */
public class VirtualWork {
    static final ReentrantLock LOCK = new ReentrantLock();
    static long delay;
    static volatile long sink;

    static void sleepStep() throws InterruptedException {
        Thread.sleep(delay);
    }

    static void lockStep() {
        LOCK.lock();
        try {
            sink++;
        } finally {
            LOCK.unlock();
        }
    }

    static int socketStep(int port) throws Exception {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            s.getOutputStream().write('?');
            return s.getInputStream().read();
        }
    }

    static void pinnedStep(Object monitor) throws InterruptedException {
        synchronized (monitor) {
            Thread.sleep(delay);
        }
    }

    /**
     * The server, on one platform thread: accepts `n` connections and
     * answers each request byte the delay after it came.
     */
    static void reply(ServerSocketChannel server, int n) {
        try (Selector selector = Selector.open()) {
            server.configureBlocking(false);
            server.register(selector, SelectionKey.OP_ACCEPT);
            ArrayDeque<Object[]> due = new ArrayDeque<>();
            ByteBuffer one = ByteBuffer.allocate(1);
            int answered = 0;
            while (answered < n) {
                long wait = due.isEmpty() ? 0 : Math.max(1, ((long) due.peek()[0] - System.nanoTime()) / 1_000_000);
                selector.select(wait);
                Iterator<SelectionKey> keys = selector.selectedKeys().iterator();
                while (keys.hasNext()) {
                    SelectionKey k = keys.next();
                    keys.remove();
                    if (k.isAcceptable()) {
                        SocketChannel c = server.accept();
                        if (c != null) {
                            c.configureBlocking(false);
                            c.register(selector, SelectionKey.OP_READ);
                        }
                    } else if (k.isReadable()) {
                        SocketChannel c = (SocketChannel) k.channel();
                        one.clear();
                        if (c.read(one) != 0) {
                            k.cancel();
                            due.add(new Object[] {System.nanoTime() + delay * 1_000_000, c});
                        }
                    }
                }
                while (!due.isEmpty() && (long) due.peek()[0] <= System.nanoTime()) {
                    SocketChannel c = (SocketChannel) due.poll()[1];
                    c.configureBlocking(true);
                    c.write(ByteBuffer.wrap(new byte[] {'!'}));
                    c.close();
                    answered++;
                }
            }
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    /** A factory of virtual threads named prefix0, prefix1, ... */
    static ThreadFactory virtualThreads(String prefix) throws Exception {
        Class<?> builder = Class.forName("java.lang.Thread$Builder");
        Object b = Thread.class.getMethod("ofVirtual").invoke(null);
        b = builder.getMethod("name", String.class, long.class).invoke(b, prefix, 0L);
        Method factory = builder.getMethod("factory");
        return (ThreadFactory) factory.invoke(b);
    }

    /**
     * Moves the JVM's next thread id on by {@code by}: Thread's ids come
     * from a counter at an address Thread.getNextThreadIdOffset() gives
     * (JDK 21 and later), added to atomically.
     */
    static void skipThreadIds(long by) throws Exception {
        Method offset = Thread.class.getDeclaredMethod("getNextThreadIdOffset");
        offset.setAccessible(true);
        long address = (long) offset.invoke(null);
        java.lang.reflect.Field f = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe");
        f.setAccessible(true);
        Object unsafe = f.get(null);
        unsafe.getClass()
                .getMethod("getAndAddLong", Object.class, long.class, long.class)
                .invoke(unsafe, null, address, by);
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        delay = Long.parseLong(args[1]);
        boolean pinned = args.length > 2 && args[2].equals("pinned");
        if (args.length > 2 && args[2].equals("highids")) {
            skipThreadIds(1L << 26);
        }
        ThreadFactory factory = virtualThreads("v-");
        List<Thread> all = new ArrayList<>();
        if (pinned) {
            // JDK 21 schedules a timed park's unpark before it finds the
            // thread pinned: the first one starts the timer thread, and the
            // carrier waits for that (a native lock, not the sleep). Start it
            // before the measured calls.
            Thread warm = virtualThreads("warm-").newThread(() -> {
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            });
            warm.start();
            warm.join();
            for (int i = 0; i < n; i++) {
                Object monitor = new Object();
                Thread t = factory.newThread(() -> {
                    try {
                        pinnedStep(monitor);
                    } catch (InterruptedException e) {
                        throw new RuntimeException(e);
                    }
                });
                t.start();
                all.add(t);
            }
            for (Thread t : all) {
                t.join();
            }
            System.out.println("DONE");
            return;
        }
        ServerSocketChannel server = ServerSocketChannel.open();
        server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 2 * n);
        int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
        Thread replier = new Thread(() -> reply(server, n), "replier");
        replier.setDaemon(true);
        replier.start();

        CountDownLatch slept = new CountDownLatch(n);
        CountDownLatch locked = new CountDownLatch(1);
        for (int i = 0; i < n; i++) {
            Thread t = factory.newThread(() -> {
                try {
                    sleepStep();
                    slept.countDown();
                    locked.await();
                    lockStep();
                    sink += socketStep(port);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            t.start();
            all.add(t);
        }
        // Every virtual thread has slept: take the lock, let them come, and
        // hold it for the delay once all of them wait for it.
        Thread holder = new Thread(() -> {
            try {
                slept.await();
                LOCK.lock();
                try {
                    locked.countDown();
                    while (LOCK.getQueueLength() < n) {
                        Thread.sleep(1);
                    }
                    Thread.sleep(delay);
                } finally {
                    LOCK.unlock();
                }
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, "holder");
        holder.start();
        for (Thread t : all) {
            t.join();
        }
        holder.join();
        server.close();
        System.out.println("DONE");
    }
}
