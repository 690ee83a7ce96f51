import java.lang.reflect.Method;
import java.util.concurrent.ThreadFactory;

/**
 * Ground truth for virtual threads waiting for a carrier (JDK 21 and
 * later; compiled for Java 11, so virtual threads are made through
 * reflection). Run with one carrier:
 * -Djdk.virtualThreadScheduler.parallelism=1
 * -Djdk.virtualThreadScheduler.maxPoolSize=1.
 * Usage: VirtualCarrier <napMs> <spinMs>
 *
 * Virtual thread "napper" sleeps napMs in {@link #nap}; once it is
 * sleeping (unmounted), virtual thread "spinner" spins spinMs in
 * {@link #spin} on the only carrier and never yields it. The napper's
 * sleep ends after napMs, but it runs again only when the spinner is done:
 * it waits spinMs - napMs for a carrier. Prints "napped N ms" (its own
 * measure of nap's wall).
 */
public class VirtualCarrier {
    static volatile long sink;

    static void nap(long ms) throws InterruptedException {
        Thread.sleep(ms);
    }

    static void spin(long ms) {
        long end = System.nanoTime() + ms * 1_000_000L;
        long x = 1;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
        }
        sink = x;
    }

    static ThreadFactory virtualFactory(String name) throws Exception {
        Method ofVirtual = Thread.class.getMethod("ofVirtual");
        Object builder = ofVirtual.invoke(null);
        Class<?> b = Class.forName("java.lang.Thread$Builder");
        builder = b.getMethod("name", String.class).invoke(builder, name);
        return (ThreadFactory) b.getMethod("factory").invoke(builder);
    }

    public static void main(String[] args) throws Exception {
        long napMs = Long.parseLong(args[0]);
        long spinMs = Long.parseLong(args[1]);
        final long[] napped = new long[1];
        Thread napper = virtualFactory("napper").newThread(() -> {
            long t0 = System.nanoTime();
            try {
                nap(napMs);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
            napped[0] = System.nanoTime() - t0;
        });
        Thread spinner = virtualFactory("spinner").newThread(() -> spin(spinMs));
        napper.start();
        // The spinner takes the carrier only once the napper sleeps.
        while (napper.getState() != Thread.State.TIMED_WAITING) {
            Thread.sleep(1);
        }
        spinner.start();
        napper.join();
        spinner.join();
        System.out.println("napped " + napped[0] / 1_000_000 + " ms");
    }
}
