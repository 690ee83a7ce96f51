import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.util.concurrent.CountDownLatch;
import java.util.function.IntToLongFunction;

/**
 * Class-loading waits against real contention: WORKERS threads
 * start together and each first calls {@code Work.viaInit}, whose first
 * call initialises {@code SlowInit} (150 ms of computation in its static
 * initialiser: the other threads wait for the class's initialisation),
 * {@code Plugin.applyAsLong} (a class of a parallel-capable loader whose
 * {@code findClass} of {@code Dep} takes 150 ms: the other threads wait
 * for the loader's per-name lock) and {@code SerialPlugin.applyAsLong}
 * (the same with a loader that is not parallel capable: they wait for the
 * loader itself). None of them blocks again. Then they call all three,
 * {@code Work.contended} (a monitor a holder thread keeps, asleep, 5 ms
 * in every 10, so that its calls block all run long) and {@code Work.tiny} in a
 * loop until the given milliseconds have passed, and print how often each
 * was called. Usage: LoadWait MILLIS
 */
public class LoadWait {
    static final int WORKERS = 4;
    static final Object LOCK = new Object();
    static volatile long sink;

    /** Computes for {@code ms} milliseconds, on CPU (no block). */
    static long spin(long ms) {
        long end = System.nanoTime() + ms * 1_000_000L;
        long x = 0;
        while (System.nanoTime() < end) {
            x++;
        }
        return x;
    }

    static final class SlowInit {
        static final long VALUE = spin(150);
    }

    static final class Work {
        static long viaInit(int i) {
            return SlowInit.VALUE + Integer.rotateLeft(i, 3);
        }

        static void contended(int i) {
            synchronized (LOCK) {
                sink += i;
            }
        }

        static int tiny(int i) {
            // A loop of two rounds: short, but not a forwarder the trivial rule skips.
            for (int k = 0; k < 2; k++) {
                i = Integer.rotateLeft(i, 5) * 31 + 7;
            }
            return i;
        }
    }

    /**
     * Defines the plugin classes itself ({@code LoadWait$Plugin} and
     * {@code LoadWait$Dep}, or the serial ones), the dependencies after
     * 300 ms of computation. Parallel capable: one lock per class name.
     */
    static class SlowLoader extends ClassLoader {
        static {
            registerAsParallelCapable();
        }

        SlowLoader() {
            super(LoadWait.class.getClassLoader());
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (!name.startsWith("LoadWait$") || !(name.endsWith("Plugin") || name.endsWith("Dep"))) {
                return super.loadClass(name, resolve);
            }
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                return c != null ? c : findClass(name);
            }
        }

        @Override
        protected Class<?> findClass(String name) throws ClassNotFoundException {
            if (name.endsWith("Dep")) {
                spin(150);
            }
            try (InputStream in = LoadWait.class.getResourceAsStream("/" + name + ".class")) {
                ByteArrayOutputStream out = new ByteArrayOutputStream();
                in.transferTo(out);
                byte[] b = out.toByteArray();
                return defineClass(name, b, 0, b.length);
            } catch (Exception e) {
                throw new ClassNotFoundException(name, e);
            }
        }
    }

    /** Loaded by {@link SlowLoader}; its first call resolves {@code Dep} through it. */
    public static final class Plugin implements IntToLongFunction {
        @Override
        public long applyAsLong(int i) {
            return Dep.twice(i) + Integer.rotateLeft(i, 7);
        }
    }

    public static final class Dep {
        static long twice(int i) {
            return 2L * i;
        }
    }

    /**
     * Not parallel capable: its lock is the loader itself, which HotSpot
     * (JDK 17) also takes itself around the loads it asks for.
     */
    static final class SerialLoader extends SlowLoader {
    }

    /** As {@link Plugin}, loaded by {@link SerialLoader}. */
    public static final class SerialPlugin implements IntToLongFunction {
        @Override
        public long applyAsLong(int i) {
            return SerialDep.thrice(i) + Integer.rotateLeft(i, 9);
        }
    }

    public static final class SerialDep {
        static long thrice(int i) {
            return 3L * i;
        }
    }

    public static void main(String[] args) throws Exception {
        long millis = Long.parseLong(args[0]);
        IntToLongFunction viaLoader = (IntToLongFunction) new SlowLoader().loadClass("LoadWait$Plugin")
                .getDeclaredConstructor().newInstance();
        IntToLongFunction viaSerial = (IntToLongFunction) new SerialLoader().loadClass("LoadWait$SerialPlugin")
                .getDeclaredConstructor().newInstance();
        CountDownLatch start = new CountDownLatch(1);
        long[][] calls = new long[WORKERS][];
        Thread[] workers = new Thread[WORKERS];
        long end = System.nanoTime() + millis * 1_000_000L;
        for (int w = 0; w < WORKERS; w++) {
            final int me = w;
            workers[w] = new Thread(() -> {
                try {
                    start.await();
                    long s = Work.viaInit(me);
                    s += viaLoader.applyAsLong(me);
                    s += viaSerial.applyAsLong(me);
                    long n = 1, c = 0, t = 0;
                    while (System.nanoTime() < end) {
                        for (int k = 0; k < 100; k++) {
                            s += Work.viaInit(k);
                            s += viaLoader.applyAsLong(k);
                            s += viaSerial.applyAsLong(k);
                            s += Work.tiny(k);
                        }
                        n += 100;
                        t += 100;
                        Work.contended(me);
                        c++;
                    }
                    sink += s;
                    calls[me] = new long[] {n, c, t};
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, "worker-" + w);
            workers[w].start();
        }
        // Holds the lock asleep (so for at least 5 ms even when a loaded
        // machine gives it no CPU), then leaves it for 5 ms.
        Thread holder = new Thread(() -> {
            try {
                while (System.nanoTime() < end) {
                    synchronized (LOCK) {
                        Thread.sleep(5);
                    }
                    Thread.sleep(5);
                }
            } catch (InterruptedException e) {
                // Done.
            }
        }, "holder");
        holder.setDaemon(true);
        holder.start();
        start.countDown();
        long n = 0, c = 0, t = 0;
        for (int w = 0; w < WORKERS; w++) {
            workers[w].join();
            n += calls[w][0];
            c += calls[w][1];
            t += calls[w][2];
        }
        System.out.println("viaInit " + n + " applyAsLong " + n + " contended " + c + " tiny " + t);
    }
}
