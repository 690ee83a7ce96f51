import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/** Two threads each burn a fixed amount of CPU time inside Spin.burn. */
public class Spin {
    static volatile long sink;

    static long burn(long cpuMillis) {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long target = mx.getCurrentThreadCpuTime() + cpuMillis * 1_000_000L;
        long x = 0;
        while (mx.getCurrentThreadCpuTime() < target) {
            for (int i = 0; i < 20_000; i++) {
                x += i ^ (x << 1);
            }
        }
        sink = x;
        return x;
    }

    public static void main(String[] args) throws Exception {
        long ms = Long.parseLong(args[0]);
        Thread a = new Thread(() -> burn(ms), "spin-a");
        Thread b = new Thread(() -> burn(ms), "spin-b");
        a.start();
        b.start();
        a.join();
        b.join();
        System.out.println("spin done");
    }
}
