package jtrace;

import jdk.internal.vm.annotation.DontInline;

/**
 * Method-tracing probes of the jtrace agent.
 *
 * The agent defines this class into the bootstrap class loader and rewrites
 * the bytecode of traced methods to call {@link #enter}, {@link #exit} and
 * {@link #exitEx} with the method's id. A probe appends (System.nanoTime(),
 * id | kind << 32) to a per-thread long[] and takes no lock and allocates
 * nothing. The agent reads the buffer through JNI (no call into Java) when
 * it is full (flush0), before it records any other event of the thread (so
 * a thread's records stay in time order), at ThreadEnd and at VM death.
 *
 * The class must only use classes the agent never rewrites (java.lang.Object,
 * Thread, ThreadLocal, System), or a traced method could recurse into the
 * probes. Compiled with --release 8.
 */
public final class Probe {
    /** Longs per buffer: pairs of (timestamp, tag). */
    private static final int CAPACITY = 8192;
    private static final long EXIT = 1L << 32;
    private static final long EXIT_EX = 2L << 32;

    private static final ThreadLocal<Probe> CURRENT = new ThreadLocal<Probe>();

    /** Read and reset by the agent through JNI. */
    private final long[] buf = new long[CAPACITY];
    private int pos;

    private Probe() {
    }

    @DontInline
    public static void enter(int id) {
        Probe p = CURRENT.get();
        if (p == null) {
            p = create();
        }
        int i = p.pos;
        long[] b = p.buf;
        if (i > CAPACITY - 2) {
            flush0();
            i = 0;
        }
        b[i] = System.nanoTime();
        b[i + 1] = id;
        p.pos = i + 2;
    }

    @DontInline
    public static void exit(int id) {
        long t = System.nanoTime();
        Probe p = CURRENT.get();
        if (p == null) {
            p = create();
        }
        int i = p.pos;
        long[] b = p.buf;
        if (i > CAPACITY - 2) {
            flush0();
            i = 0;
        }
        b[i] = t;
        b[i + 1] = id | EXIT;
        p.pos = i + 2;
    }

    @DontInline
    public static void exitEx(int id) {
        long t = System.nanoTime();
        Probe p = CURRENT.get();
        if (p == null) {
            p = create();
        }
        int i = p.pos;
        long[] b = p.buf;
        if (i > CAPACITY - 2) {
            flush0();
            i = 0;
        }
        b[i] = t;
        b[i + 1] = id | EXIT_EX;
        p.pos = i + 2;
    }

    private static Probe create() {
        Probe p = new Probe();
        register0(p);
        CURRENT.set(p);
        return p;
    }

    /** Forces initialisation (called by the agent once, after defining the class). */
    static void init() {
    }

    /**
     * Binds the park and sleep natives to the agent's wrappers (true) or
     * back to the JVM's own functions (false) when the agent attaches to or
     * leaves a running JVM. It goes through Java code of this boot-loader
     * class because the JVM prints a warning when code of another class
     * loader (or no Java code) re-registers a native method of java.base.
     */
    static void bindWaits(boolean wrap) {
        bindWaits0(wrap);
    }

    private static native void bindWaits0(boolean wrap);

    /** Registers the calling thread's buffer with the agent. */
    private static native void register0(Probe p);

    /** Hands the calling thread's full buffer to the agent. */
    private static native void flush0();
}
