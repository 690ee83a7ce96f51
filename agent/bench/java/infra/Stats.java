package infra;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/** Per-user response statistics. */
public final class Stats {
    private static final ConcurrentHashMap<String, LongAdder> BYTES = new ConcurrentHashMap<>();

    public static void record(String user, int bytes) {
        BYTES.computeIfAbsent(user, u -> new LongAdder()).add(bytes);
    }
}
