import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * A pool of four threads idle for IDLE ms (waiting in getTask for a task),
 * then each blocked on a monitor that "holder" keeps for LOCK ms: the first
 * half is waiting for work, the second is working time.
 * Usage: PoolIdleLock [idleMs] [lockMs]
 */
public class PoolIdleLock {
    static final Object LOCK = new Object();
    static volatile long sink;

    static void sleepQuietly(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    /** Blocks entering LOCK while "holder" keeps it. */
    static void contend() {
        synchronized (LOCK) {
            sink++;
        }
    }

    public static void main(String[] args) throws Exception {
        long idle = args.length > 0 ? Long.parseLong(args[0]) : 400;
        long lock = args.length > 1 ? Long.parseLong(args[1]) : 400;
        ThreadPoolExecutor pool = new ThreadPoolExecutor(4, 4, 1, TimeUnit.MINUTES, new LinkedBlockingQueue<>());
        pool.prestartAllCoreThreads();
        sleepQuietly(idle);
        CountDownLatch held = new CountDownLatch(1);
        Thread holder = new Thread(() -> {
            synchronized (LOCK) {
                held.countDown();
                sleepQuietly(lock);
            }
        }, "holder");
        holder.start();
        held.await();
        CountDownLatch done = new CountDownLatch(4);
        for (int i = 0; i < 4; i++) {
            pool.execute(() -> {
                contend();
                done.countDown();
            });
        }
        done.await();
        pool.shutdown();
        pool.awaitTermination(10, TimeUnit.SECONDS);
        holder.join();
        System.out.println("pool idle then locked: done");
    }
}
