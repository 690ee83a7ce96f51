import java.util.concurrent.locks.LockSupport;

/**
 * Many short blocks and a few long ones (tests/deferred_stacks.rs): for
 * <ms> milliseconds, thread "blocks" parks 50 µs at a time in shortPark
 * and, every 100th round, sleeps 5 ms in longSleep. Usage: java
 * ShortLongBlocks <ms>
 */
public class ShortLongBlocks {
    static void shortPark() {
        LockSupport.parkNanos(50_000L);
    }

    static void longSleep() throws InterruptedException {
        Thread.sleep(5);
    }

    static void stuckHere() {
        while (true) LockSupport.park();
    }

    static void run(long ms) throws InterruptedException {
        long end = System.nanoTime() + ms * 1_000_000L;
        for (int i = 1; System.nanoTime() < end; i++) {
            if (i % 100 == 0) longSleep();
            else shortPark();
        }
    }

    public static void main(String[] args) throws Exception {
        long ms = Long.parseLong(args[0]);
        Thread stuck = new Thread(ShortLongBlocks::stuckHere, "stuck");
        stuck.setDaemon(true);
        stuck.start();
        Thread t = new Thread(() -> {
            try {
                run(ms);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, "blocks");
        t.start();
        t.join();
        System.out.println("DONE");
    }
}
