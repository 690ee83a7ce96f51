package jdk.internal.misc;

/**
 * Compile-time stand-in for the JDK's own jdk.internal.misc.Unsafe (java.base,
 * exported to jtrace.Probe by the agent at run time). Only the members the
 * probe calls are declared, with the JDK's signatures (JDK 9 and later); this
 * class is never loaded.
 */
public final class Unsafe {
    private Unsafe() {
    }

    public static Unsafe getUnsafe() {
        throw new UnsupportedOperationException("compile-time stand-in");
    }

    public long objectFieldOffset(Class<?> c, String name) {
        throw new UnsupportedOperationException("compile-time stand-in");
    }

    public long getLong(Object o, long offset) {
        throw new UnsupportedOperationException("compile-time stand-in");
    }

    public int getInt(Object o, long offset) {
        throw new UnsupportedOperationException("compile-time stand-in");
    }

    /** JDK 12 and later (virtual threads: JDK 21 and later). */
    public Object getReference(Object o, long offset) {
        throw new UnsupportedOperationException("compile-time stand-in");
    }

    public long staticFieldOffset(java.lang.reflect.Field f) {
        throw new UnsupportedOperationException("compile-time stand-in");
    }

    public Object staticFieldBase(java.lang.reflect.Field f) {
        throw new UnsupportedOperationException("compile-time stand-in");
    }
}
