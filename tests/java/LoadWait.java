import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.util.concurrent.CountDownLatch;
import java.util.function.IntToLongFunction;

/**
 * Class-loading waits against real contention (issue 17): WORKERS threads
 * start together and each first calls {@code Work.viaInit}, whose first
 * call initialises {@code SlowInit} (300 ms of computation in its static
 * initialiser: the other threads wait for the class's initialisation), and
 * {@code Plugin.applyAsLong} (a class of a parallel-capable loader whose
 * {@code findClass} of {@code Dep} takes 300 ms: the other threads wait
 * for the loader's per-name lock). Neither method blocks again. Then they
 * call both, {@code Work.contended} (a monitor a holder thread keeps for
 * 2 ms every 10 ms, so that its calls block all run long) and
 * {@code Work.tiny} in a loop for the given milliseconds, and print how
 * often each was called. Usage: LoadWait MILLIS
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
        static final long VALUE = spin(300);
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
            return Integer.rotateLeft(i, 5) * 31 + 7;
        }
    }

    /**
     * Defines {@code LoadWait$Plugin} and {@code LoadWait$Dep} itself
     * (parallel capable: one lock per class name), the second after
     * 300 ms of computation.
     */
    static final class SlowLoader extends ClassLoader {
        static {
            registerAsParallelCapable();
        }

        SlowLoader() {
            super(LoadWait.class.getClassLoader());
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (!name.equals("LoadWait$Plugin") && !name.equals("LoadWait$Dep")) {
                return super.loadClass(name, resolve);
            }
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                return c != null ? c : findClass(name);
            }
        }

        @Override
        protected Class<?> findClass(String name) throws ClassNotFoundException {
            if (name.equals("LoadWait$Dep")) {
                spin(300);
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

    public static void main(String[] args) throws Exception {
        long millis = Long.parseLong(args[0]);
        IntToLongFunction viaLoader = (IntToLongFunction) new SlowLoader().loadClass("LoadWait$Plugin")
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
                    long n = 1, c = 0, t = 0;
                    while (System.nanoTime() < end) {
                        for (int k = 0; k < 100; k++) {
                            s += Work.viaInit(k);
                            s += viaLoader.applyAsLong(k);
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
        Thread holder = new Thread(() -> {
            while (System.nanoTime() < end) {
                synchronized (LOCK) {
                    spin(2);
                }
                try {
                    Thread.sleep(10);
                } catch (InterruptedException e) {
                    return;
                }
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
