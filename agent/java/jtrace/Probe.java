package jtrace;

// The event layout and codes shared with the agent (generated from
// agent/src/probe/layout.rs by agent/build.rs): compile-time constants.
import static jtrace.Layout.*;

import jdk.internal.misc.Unsafe;
import jdk.internal.vm.annotation.DontInline;
import jdk.internal.vm.annotation.Stable;

/**
 * Method-tracing probes of the jtrace agent.
 *
 * The agent defines this class into the bootstrap class loader and rewrites
 * the bytecode of traced methods to call {@link #enter} with the method's
 * id, keep what it returns in a local of its own, and pass that to
 * {@link #exit} and {@link #exitEx}. A demoted method (adaptive demotion:
 * {@link #DEMOTED}) keeps these calls, which then record nothing, so that
 * demoting needs no retransformation, which would deoptimise its callers
 * and throw its class's compiled code away. C2 inlines the three where
 * they are called hot: in a demoted method compiled after its demotion
 * they fold away; C1 calls them (see {@link #PAD}). A probe appends one long per event
 * to a per-thread long[] and takes no lock and allocates nothing. The long
 * is the event exactly as a METHOD_BATCH record stores it (docs/FORMAT.md):
 * the nanoseconds since the thread's previous event (System.nanoTime()),
 * below ID_SHIFT, and the method id with the kind (EXIT, EXIT_EX) above
 * (Layout), so that the agent writes the buffer out nearly as it is. The
 * agent reads the buffer through JNI (no call into Java) when it is full
 * (flush0), before it records any other event of the thread (so a thread's
 * records stay in time order), at ThreadEnd and at VM death; it then sets
 * {@code base} to {@code last}.
 *
 * A thread finds its buffer through a small array indexed by its Java
 * thread id (read with Unsafe: Thread.getId() can be overridden), which
 * costs a few loads where a ThreadLocal lookup costs about 5 ns; the
 * ThreadLocal stays the owner of the buffer and serves the array's misses.
 * The agent exports jdk.internal.misc to this class before initialising it;
 * if it could not, every lookup goes through the ThreadLocal.
 *
 * A virtual thread (JDK 21 and later) has a buffer of its own, smaller
 * ({@link #VIRTUAL_CAPACITY}), which travels with it from carrier to
 * carrier: its events are its own whichever carrier runs it, and the times
 * are the one clock's. The agent writes it out when it is full
 * (flushVirtual0, on the carrier running the virtual thread), at the
 * virtual thread's end and at VM death, under the virtual thread's own
 * identity (docs/FORMAT.md, "Virtual threads"); it learns of the buffer
 * through registerVirtual0.
 *
 * Mounts, unmounts and unparks of virtual threads: the agent rewrites
 * java.lang.VirtualThread's mount(), unmount(), unpark() (& co.) and
 * run(Runnable), and the blocking calls whose unmount has a reason of its
 * own (sleepNanos, the socket parks), to call {@link #mounting},
 * {@link #unmounting}, {@link #unparked}, {@link #started},
 * {@link #blocking} and {@link #blocked}. A mount, unmount or unpark is one
 * event appended to the buffer of the carrier (the kernel thread running
 * it): kind VTHREAD, what happened (V_*) from VTHREAD_WHAT_SHIFT, the
 * virtual thread's Java id from ID_SHIFT (Layout). The agent writes these
 * events out as VTHREAD_* records of the carrier, not as method events. A park's
 * unmount is preceded by a V_BLOCKER event naming the class of its park
 * blocker (by the agent's id, from blockerId0), as JVMTI's route records
 * it. JVMTI's
 * virtual thread events cost ≈ 5 µs each (BENCHMARKS.md); these cost what
 * a method probe does.
 *
 * The class must only use classes the agent never rewrites (java.lang.Object,
 * Thread, ThreadLocal, System, jdk.internal.*), or a traced method could
 * recurse into the probes. Compiled with --release 8 (against compile-time
 * stand-ins for the jdk.internal classes).
 */
public final class Probe {
    /** Events per buffer of a virtual thread (there may be very many). */
    private static final int VIRTUAL_CAPACITY = 1024;
    /** Size of the thread-id-indexed cache; a power of two. */
    private static final int SLOTS = 1024;

    /**
     * Demotion marks by method id, written by the agent's demoter through
     * JNI: {@code DEMOTED[id]} is 1 once the method is demoted. Stable:
     * once a mark is set, the JIT takes it for a constant, so that in a
     * demoted method compiled after its demotion the probes fold away.
     * One flat array (1 MiB), so that {@link #enter} is a load and a test.
     * Within a session a mark only goes from 0 to 1. A new attach session
     * clears the marks: the previous session's end retransformed every
     * class with probes back, which deoptimised all compiled code that had
     * a mark as a constant.
     */
    @Stable
    private static final byte[] DEMOTED = new byte[MAX_METHODS];

    /**
     * Padding of {@link #enter}, {@link #exit} and {@link #exitEx}: 0, so
     * that their {@code if (PAD != 0)} blocks of {@link #pad} calls never
     * run, and the JIT, which reads a final field as a constant, drops
     * them. Their bytes still count: each probe is longer than C1's
     * inlining limit (C1MaxInlineSize, 35 bytes of bytecode) and well
     * under C2's for hot calls (FreqInlineSize, 325). C1's profiled code
     * (tier 3) then calls them, compiled by C2, instead of inlining their
     * checks with their branch counters: one profile of this class that
     * every traced call on every CPU would write, a cache line the CPUs
     * take from each other at every call (BENCHMARKS.md, "C1's shared
     * probe profile"). C2 still inlines them where the call is hot, so
     * that a demoted method's checks fold away. Not a compile-time
     * constant, so that javac keeps the blocks.
     */
    private static final int PAD = padding();

    private static final ThreadLocal<Probe> CURRENT = new ThreadLocal<Probe>();
    /** Each slot: the buffer of the last thread whose id maps to it. */
    private static final Probe[] BY_THREAD = new Probe[SLOTS];

    private static final Unsafe UNSAFE;
    /** Offset of Thread.tid, or -1 when the cache is not used. */
    private static final long TID_OFFSET;
    /** java.lang.BaseVirtualThread (JDK 21 and later), or null. */
    private static final Class<?> VIRTUAL;

    /** java.lang.VirtualThread (JDK 21 and later), or null. */
    private static final Class<?> VTHREAD_CLASS;
    /** Offsets of VirtualThread.carrierThread and .state, or -1. */
    private static final long CARRIER_OFFSET;
    private static final long STATE_OFFSET;
    /** Offset of Thread.parkBlocker, or -1. */
    private static final long BLOCKER_OFFSET;
    /** Offset of VirtualThread.timeout (JDK 25: a timed park's nanoseconds), or -1. */
    private static final long TIMEOUT_OFFSET;
    /**
     * Park blockers' classes by the agent's id (blockerId0), filled as
     * they come: a class found here costs no call into the agent.
     */
    private static final Class<?>[] BLOCKER_CLASSES = new Class<?>[64];
    /** VirtualThread's states of this JDK that tell why it unmounts (-1: none). */
    private static final int S_RUNNING;
    private static final int S_PARKING;
    private static final int S_TIMED_PARKING;
    private static final int S_YIELDING;
    private static final int S_BLOCKING;
    private static final int S_WAITING;
    private static final int S_TIMED_WAITING;
    /** Carriers' buffers by slot: a virtual thread reaches its carrier's (BY_THREAD also holds virtual threads'). */
    private static final Probe[] CARRIERS = new Probe[SLOTS];
    /**
     * The virtual threads inside a marked blocking call, by Java thread id
     * modulo the length: {@code id << 16 | depth << 8 | V_* reason} (one
     * long: written and read whole). Two in such calls at once whose ids
     * share a slot: the later one's reason stands, the earlier's unmounts
     * say park.
     */
    private static final long[] BLOCKING = new long[4 * SLOTS];
    /** Slots a carrier's buffer may take from its own on in CARRIERS. */
    private static final int CARRIER_PROBES = 8;

    static {
        Class<?> virtual = null;
        try {
            virtual = Class.forName("java.lang.BaseVirtualThread");
        } catch (Throwable e) {
            // Before JDK 21: no virtual threads.
        }
        VIRTUAL = virtual;

        Unsafe u = null;
        long offset = -1;
        try {
            u = Unsafe.getUnsafe();
            offset = u.objectFieldOffset(Thread.class, "tid");
        } catch (Throwable e) {
            // Not exported to this class, or no such field: ThreadLocal only.
            u = null;
            offset = -1;
        }
        UNSAFE = u;
        TID_OFFSET = offset;

        Class<?> vt = null;
        long carrier = -1;
        long state = -1;
        long blocker = -1;
        long timeout = -1;
        int[] states = {-1, -1, -1, -1, -1, -1, -1};
        if (virtual != null && u != null) {
            try {
                vt = Class.forName("java.lang.VirtualThread", false, null);
                carrier = u.objectFieldOffset(vt, "carrierThread");
                state = u.objectFieldOffset(vt, "state");
                try {
                    blocker = u.objectFieldOffset(Thread.class, "parkBlocker");
                } catch (Throwable e) {
                    // Parks are then recorded without their blocker.
                    blocker = -1;
                }
                try {
                    timeout = u.objectFieldOffset(vt, "timeout");
                } catch (Throwable e) {
                    // Before JDK 25 a timer thread unparks on time.
                    timeout = -1;
                }
                String[] names = {"RUNNING", "PARKING", "TIMED_PARKING", "YIELDING", "BLOCKING", "WAITING", "TIMED_WAITING"};
                for (int i = 0; i < names.length; i++) {
                    states[i] = constant(u, vt, names[i]);
                }
            } catch (Throwable e) {
                // Not this JDK's layout: the agent follows them through JVMTI.
                vt = null;
                carrier = -1;
                state = -1;
            }
        }
        VTHREAD_CLASS = vt;
        CARRIER_OFFSET = carrier;
        STATE_OFFSET = state;
        BLOCKER_OFFSET = blocker;
        TIMEOUT_OFFSET = timeout;
        S_RUNNING = states[0];
        S_PARKING = states[1];
        S_TIMED_PARKING = states[2];
        S_YIELDING = states[3];
        S_BLOCKING = states[4];
        S_WAITING = states[5];
        S_TIMED_WAITING = states[6];
    }

    /** What {@link #PAD} holds: a method, so that PAD is no compile-time constant. */
    private static int padding() {
        return 0;
    }

    /** The static int constant {@code name} of {@code c}, or -1 if it has none. */
    private static int constant(Unsafe u, Class<?> c, String name) {
        try {
            java.lang.reflect.Field f = c.getDeclaredField(name);
            return u.getInt(u.staticFieldBase(f), u.staticFieldOffset(f));
        } catch (NoSuchFieldException e) {
            return -1;
        }
    }

    /**
     * Whether this JDK's VirtualThread is known well enough to follow its
     * mounts from the bytecode (read by the agent after init()).
     */
    private static boolean virtualThreadsFollowed() {
        return VTHREAD_CLASS != null && TID_OFFSET >= 0 && S_RUNNING >= 0 && S_PARKING >= 0;
    }

    /** Read and reset by the agent through JNI. */
    private final long[] buf;
    private final Thread owner;
    /** A virtual thread's buffer. */
    private final boolean virtual;
    /** The owner's Java thread id (read by the agent for a virtual thread's). */
    private final long threadId;
    /** Index of the owner's slot in BY_THREAD, or -1 (read by the agent at ThreadEnd). */
    private final int slot;
    private int pos;
    /** Time of the thread's last event: the next event's delta is from it. */
    private long last;
    /** Time the first event in buf counts its delta from (set by the agent). */
    private long base;

    private Probe(Thread owner, boolean virtual) {
        this.owner = owner;
        this.virtual = virtual;
        this.buf = new long[virtual ? VIRTUAL_CAPACITY : CAPACITY];
        // Thread.getId() may be overridden (and traced) by a platform
        // thread's class, not by a virtual thread's, which is final.
        this.threadId = TID_OFFSET >= 0 ? UNSAFE.getLong(owner, TID_OFFSET) : virtual ? owner.getId() : -1;
        this.slot = TID_OFFSET >= 0 ? (int) threadId & (SLOTS - 1) : -1;
    }

    /**
     * Records the entry of method {@code id} unless it is demoted; returns
     * what the method's exits pass back: {@code id} if this entry was
     * recorded, -1 if not, so that a call records both its ends or
     * neither, whenever its method is demoted.
     */
    public static int enter(int id) {
        // A load and a test; the agent gives no id past the marks.
        if (DEMOTED[id] != 0) {
            return -1;
        }
        if (PAD != 0) {
            pad();
            pad();
            pad();
            pad();
            pad();
        }
        return recordEnter(id);
    }

    /** Records a normal exit; {@code id} is what {@link #enter} returned. */
    public static void exit(int id) {
        if (id >= 0) {
            if (PAD != 0) {
                pad();
                pad();
                pad();
                pad();
                pad();
                pad();
                pad();
            }
            recordExit(id);
        }
    }

    /** Records an exit by exception; {@code id} is what {@link #enter} returned. */
    public static void exitEx(int id) {
        if (id >= 0) {
            if (PAD != 0) {
                pad();
                pad();
                pad();
                pad();
                pad();
                pad();
                pad();
            }
            recordExitEx(id);
        }
    }

    /** Never called: see {@link #PAD}. */
    private static void pad() {
    }

    // The recording halves stay out of line, so that what the JIT inlines
    // into every traced method is the check alone.

    @DontInline
    private static int recordEnter(int id) {
        Probe p = current();
        p.append(System.nanoTime(), (long) id << ID_SHIFT);
        return id;
    }

    @DontInline
    private static void recordExit(int id) {
        long t = System.nanoTime();
        current().append(t, (long) id << ID_SHIFT | EXIT);
    }

    @DontInline
    private static void recordExitEx(int id) {
        long t = System.nanoTime();
        current().append(t, (long) id << ID_SHIFT | EXIT_EX);
    }

    /** Appends the event at time {@code t} with {@code tag} (id and kind, high bits). */
    private void append(long t, long tag) {
        long[] b = buf;
        int i = pos;
        long d = t - last;
        if (i >= b.length || (d >>> ID_SHIFT) != 0) {
            i = restart(t);
            d = 0;
        }
        b[i] = d | tag;
        last = t;
        pos = i + 1;
    }

    /** The calling thread's buffer. */
    private static Probe current() {
        Thread t = Thread.currentThread();
        if (TID_OFFSET >= 0) {
            Probe p = BY_THREAD[(int) UNSAFE.getLong(t, TID_OFFSET) & (SLOTS - 1)];
            if (p != null && p.owner == t) {
                return p;
            }
        }
        return lookup(t);
    }

    /** The cache missed: the thread's buffer from its ThreadLocal (made on first use). */
    private static Probe lookup(Thread t) {
        Probe p = CURRENT.get();
        if (p == null) {
            boolean virtual = VIRTUAL != null && VIRTUAL.isInstance(t);
            p = new Probe(t, virtual);
            if (virtual) {
                registerVirtual0(p);
            } else {
                register0(p);
            }
            CURRENT.set(p);
        }
        if (p.slot >= 0) {
            BY_THREAD[p.slot] = p;
        }
        return p;
    }

    /**
     * The buffer is full, or the event at {@code t} is too far from the
     * last one for a 32-bit delta: hands the buffer to the agent and counts
     * the next event from {@code t}. Returns the index to write it at.
     */
    private int restart(long t) {
        if (pos > 0) {
            if (virtual) {
                flushVirtual0(this);
            } else {
                flush0();
            }
        }
        pos = 0;
        base = t;
        last = t;
        return 0;
    }

    /**
     * Called first thing in java.lang.VirtualThread.unpark() (and, from JDK
     * 24, parkTimeoutExpired() and unblock()) with the virtual thread being
     * resumed, on the resuming thread: recorded on its kernel thread (the
     * carrier, if a virtual thread resumes it).
     */
    public static void unparked(Object vthread) {
        Thread t = Thread.currentThread();
        Probe p = t.getClass() == VTHREAD_CLASS ? carrierOf(t) : current();
        if (p == null) {
            vthreadEvent0(vthread, V_UNPARK);
        } else {
            p.vthreadEvent(V_UNPARK, vthread);
        }
    }

    /** VirtualThread.mount() began: on the carrier, the current thread. */
    public static void mounting(Object vthread) {
        Probe p = current();
        if (p.slot >= 0 && find(p.owner) != p) {
            keep(p);
        }
        p.vthreadEvent(V_MOUNT, vthread);
    }

    /**
     * VirtualThread.unmount() began (the current thread is still the
     * virtual thread): why, from its state and the blocking call marked;
     * still running means its task is done, and this is its end.
     */
    public static void unmounting(Object vthread) {
        int s = UNSAFE.getInt(vthread, STATE_OFFSET) & 0xff;
        if (s == S_RUNNING) {
            ended0(vthread);
            return;
        }
        Probe p = carrierOf(vthread);
        int what;
        if (s == S_PARKING || s == S_TIMED_PARKING) {
            long tid = UNSAFE.getLong(vthread, TID_OFFSET);
            long e = BLOCKING[(int) tid & (BLOCKING.length - 1)];
            what = e >>> 16 == tid ? (int) (e & 0xff) : V_PARK;
        } else if (s == S_YIELDING) {
            what = V_YIELD;
        } else if (s == S_BLOCKING) {
            what = V_MONITOR;
        } else if (s == S_WAITING || s == S_TIMED_WAITING) {
            what = V_WAIT;
        } else {
            what = V_UNMOUNT;
        }
        int blocker = what == V_PARK ? blockerId(vthread) : -1;
        if (TIMEOUT_OFFSET >= 0 && (s == S_TIMED_PARKING || s == S_TIMED_WAITING)) {
            timeoutOf(p, vthread);
        }
        if (p == null) {
            vthreadEvent0(vthread, blocker < 0 ? what : what | (blocker + 1) << NATIVE_BLOCKER_SHIFT);
        } else if (blocker < 0) {
            p.vthreadEvent(what, vthread);
        } else {
            p.parkedOn(vthread, blocker);
        }
    }

    /**
     * The agent's id of the class of {@code vthread}'s park blocker (the
     * object LockSupport.park was given), or -1 if it has none.
     */
    private static int blockerId(Object vthread) {
        if (BLOCKER_OFFSET < 0) {
            return -1;
        }
        Object b = UNSAFE.getReference(vthread, BLOCKER_OFFSET);
        if (b == null) {
            return -1;
        }
        Class<?> c = b.getClass();
        Class<?>[] known = BLOCKER_CLASSES;
        for (int i = 0; i < known.length; i++) {
            Class<?> k = known[i];
            if (k == c) {
                return i;
            }
            if (k == null) {
                break;
            }
        }
        // Slots may fill out of order (carriers race): a miss only costs this call.
        int id = blockerId0(c);
        if (id >= 0 && id < known.length) {
            known[id] = c;
        }
        return id >= 0 && (id >>> VTHREAD_ID_BITS) == 0 ? id : -1;
    }

    /** The agent's id of a park blocker's class (the same id for the same class name). */
    private static native int blockerId0(Class<?> c);

    /**
     * A park unmount with its blocker's class: V_BLOCKER then V_PARK, at
     * one time, always in the same buffer (the agent pairs them).
     */
    private void parkedOn(Object vthread, int blocker) {
        long id = UNSAFE.getLong(vthread, TID_OFFSET);
        if ((id >>> VTHREAD_ID_BITS) != 0) {
            vthreadEvent0(vthread, V_PARK | (blocker + 1) << NATIVE_BLOCKER_SHIFT);
            return;
        }
        long t = System.nanoTime();
        if (pos > buf.length - 2) {
            pos = restart(t);
        }
        append(t, VTHREAD | (long) V_BLOCKER << VTHREAD_WHAT_SHIFT | (long) blocker << ID_SHIFT);
        append(t, VTHREAD | (long) V_PARK << VTHREAD_WHAT_SHIFT | id << ID_SHIFT);
    }

    /**
     * A V_TIMEOUT event before a timed unmount: its timeout in
     * microseconds (saturated), which the unmount right after it in this
     * buffer takes (the agent pairs them).
     */
    private static void timeoutOf(Probe p, Object vthread) {
        long nanos = UNSAFE.getLong(vthread, TIMEOUT_OFFSET);
        long id = UNSAFE.getLong(vthread, TID_OFFSET);
        if (p == null || (id >>> VTHREAD_ID_BITS) != 0) {
            // Its unmount goes through vthreadEvent0 (on this thread) too.
            timeout0(nanos);
            return;
        }
        long us = nanos / 1000;
        long max = (1L << VTHREAD_ID_BITS) - 1;
        p.append(System.nanoTime(), VTHREAD | (long) V_TIMEOUT << VTHREAD_WHAT_SHIFT | Math.min(Math.max(us, 0), max) << ID_SHIFT);
    }

    /** The timeout (ns) of the timed unmount vthreadEvent0 records next on this thread. */
    private static native void timeout0(long nanos);

    /** VirtualThread.run(Runnable) began: its first mount (the agent records its name). */
    public static void started(Object vthread) {
        started0(vthread);
    }

    /**
     * A blocking call began on the current thread (VirtualThread.sleepNanos:
     * V_SLEEP, the socket parks: V_SOCKET): on a virtual thread, the reason
     * of every unmount until it returns (a sleep parks again when woken
     * early, maybe on another carrier), kept with the virtual thread in
     * {@link #BLOCKING}.
     */
    public static void blocking(int why) {
        Thread t = Thread.currentThread();
        if (t.getClass() == VTHREAD_CLASS) {
            long tid = UNSAFE.getLong(t, TID_OFFSET);
            int i = (int) tid & (BLOCKING.length - 1);
            long e = BLOCKING[i];
            long depth = e >>> 16 == tid && (e & 0xff) == why ? (e >>> 8 & 0xff) + 1 : 1;
            BLOCKING[i] = tid << 16 | Math.min(depth, 0xff) << 8 | why;
        }
    }

    /** That blocking call returned (or threw): it gives no reason any more, but an outer one may. */
    public static void blocked(int why) {
        Thread t = Thread.currentThread();
        if (t.getClass() == VTHREAD_CLASS) {
            long tid = UNSAFE.getLong(t, TID_OFFSET);
            int i = (int) tid & (BLOCKING.length - 1);
            long e = BLOCKING[i];
            if (e >>> 16 == tid) {
                long depth = (e >>> 8 & 0xff) - 1;
                BLOCKING[i] = depth > 0 ? tid << 16 | depth << 8 | (e & 0xff) : 0;
            }
        }
    }

    /** The buffer of the carrier running {@code vthread}, if it has one and CARRIERS holds it. */
    private static Probe carrierOf(Object vthread) {
        Object c = UNSAFE.getReference(vthread, CARRIER_OFFSET);
        return c == null ? null : find(c);
    }

    /**
     * The buffer of carrier {@code c} in CARRIERS: at its slot or one of
     * the next CARRIER_PROBES (two carriers whose ids share a slot both
     * stay), or null.
     */
    private static Probe find(Object c) {
        int s = (int) UNSAFE.getLong(c, TID_OFFSET);
        for (int i = 0; i < CARRIER_PROBES; i++) {
            Probe p = CARRIERS[(s + i) & (SLOTS - 1)];
            if (p == null) {
                return null;
            }
            if (p.owner == c) {
                return p;
            }
        }
        return null;
    }

    /** Puts a carrier's buffer into CARRIERS: a free slot, a dead thread's, else its own. */
    private static void keep(Probe p) {
        for (int i = 0; i < CARRIER_PROBES; i++) {
            int s = (p.slot + i) & (SLOTS - 1);
            Probe q = CARRIERS[s];
            if (q == null || !q.owner.isAlive()) {
                CARRIERS[s] = p;
                return;
            }
        }
        CARRIERS[p.slot] = p;
    }

    /** Appends a virtual thread event ({@code what}, V_*) about {@code vthread}. */
    private void vthreadEvent(int what, Object vthread) {
        long id = UNSAFE.getLong(vthread, TID_OFFSET);
        if ((id >>> VTHREAD_ID_BITS) != 0) {
            vthreadEvent0(vthread, what);
            return;
        }
        append(System.nanoTime(), VTHREAD | (long) what << VTHREAD_WHAT_SHIFT | id << ID_SHIFT);
    }

    /**
     * Records a virtual thread event on the calling kernel thread (the
     * probes could not append it): V_* below NATIVE_BLOCKER_SHIFT; for a
     * V_PARK, its blocker's id + 1 from there on (0: none).
     */
    private static native void vthreadEvent0(Object vthread, int what);

    /** Records a virtual thread's start, with its name. */
    private static native void started0(Object vthread);

    /** Records a virtual thread's end, with its name, and writes out its buffer. */
    private static native void ended0(Object vthread);

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

    /** Registers a virtual thread's buffer with the agent (on its first traced call). */
    private static native void registerVirtual0(Probe p);

    /** Hands a virtual thread's full buffer to the agent (on the carrier running it). */
    private static native void flushVirtual0(Probe p);
}
