import java.io.InputStream;
import java.util.concurrent.locks.LockSupport;

/**
 * JIT code of unloaded classes (tests/stacks.rs): rounds 0..ROUNDS-1, each
 * on a thread "round-k" of its own. Round k loads ReuseRk in a class
 * loader of its own, calls its run() until compiled (run with -Xbatch, so
 * a compilation finishes before the call that asked for it goes on), then
 * parks in that compiled code; then the loader is dropped and the heap
 * collected, so the class is unloaded and its code freed, and the next
 * round's code may be put at the same addresses. A thread round-k only
 * ever runs ReuseRk's code: a frame of round-k named ReuseRj (j != k)
 * would be a wrong name. Prints "DONE".
 */
public final class CodeReuse {
    static final int ROUNDS = 10;
    static volatile Throwable failed;

    /** What each ReuseR* is (public: they are in another loader's package). */
    public interface Body {
        void run(long nanos);
    }

    public static void main(String[] args) throws Exception {
        for (int k = 0; k < ROUNDS; k++) {
            final int round = k;
            Thread t = new Thread(() -> {
                try {
                    round(round);
                } catch (Throwable e) {
                    failed = e;
                }
            }, "round-" + k);
            t.start();
            t.join();
            if (failed != null) throw new RuntimeException("round " + k, failed);
            for (int i = 0; i < 3; i++) {
                System.gc();
                Thread.sleep(50);
            }
        }
        System.out.println("DONE");
    }

    static void round(int k) throws Exception {
        ClassLoader loader = new Own(CodeReuse.class.getClassLoader());
        java.lang.reflect.Constructor<?> c = loader.loadClass("ReuseR" + k).getDeclaredConstructor();
        c.setAccessible(true);
        Body body = (Body) c.newInstance();
        // Warm-up: every 64th call parks 1 us, so the compiled code has
        // seen the park (no uncommon trap at the first real one).
        for (int i = 0; i < 20_000; i++) body.run((i & 63) == 0 ? 1_000 : 0);
        for (int i = 0; i < 10; i++) body.run(20_000_000L);
    }

    /** Defines ReuseR* itself (so they die with it), the rest from its parent. */
    static final class Own extends ClassLoader {
        Own(ClassLoader parent) {
            super(parent);
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (!name.startsWith("ReuseR")) return super.loadClass(name, resolve);
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c != null) return c;
                try (InputStream in = getParent().getResourceAsStream(name + ".class")) {
                    byte[] b = in.readAllBytes();
                    return defineClass(name, b, 0, b.length);
                } catch (java.io.IOException e) {
                    throw new ClassNotFoundException(name, e);
                }
            }
        }
    }
}

final class ReuseR0 implements CodeReuse.Body {
    public void run(long nanos) {
        LockSupport.parkNanos(nanos);
    }
}

final class ReuseR1 implements CodeReuse.Body {
    public void run(long nanos) {
        LockSupport.parkNanos(nanos);
    }
}

final class ReuseR2 implements CodeReuse.Body {
    public void run(long nanos) {
        LockSupport.parkNanos(nanos);
    }
}

final class ReuseR3 implements CodeReuse.Body {
    public void run(long nanos) {
        LockSupport.parkNanos(nanos);
    }
}

final class ReuseR4 implements CodeReuse.Body {
    public void run(long nanos) {
        LockSupport.parkNanos(nanos);
    }
}

final class ReuseR5 implements CodeReuse.Body {
    public void run(long nanos) {
        LockSupport.parkNanos(nanos);
    }
}

final class ReuseR6 implements CodeReuse.Body {
    public void run(long nanos) {
        LockSupport.parkNanos(nanos);
    }
}

final class ReuseR7 implements CodeReuse.Body {
    public void run(long nanos) {
        LockSupport.parkNanos(nanos);
    }
}

final class ReuseR8 implements CodeReuse.Body {
    public void run(long nanos) {
        LockSupport.parkNanos(nanos);
    }
}

final class ReuseR9 implements CodeReuse.Body {
    public void run(long nanos) {
        LockSupport.parkNanos(nanos);
    }
}
