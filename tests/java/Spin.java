import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/** Two threads each burn a fixed amount of CPU time inside Spin.burn. */
public class Spin {
    static volatile long sink;

    static ThreadMXBean mx;

    static long burn(long cpuMillis) {
        long target = mx.getCurrentThreadCpuTime() + cpuMillis * 1_000_000L;
        long x = 0;
        while (mx.getCurrentThreadCpuTime() < target) {
            for (int i = 0; i < 500; i++) {
                x += i ^ (x << 1);
            }
        }
        sink = x;
        return x;
    }

    public static void main(String[] args) throws Exception {
        long ms = Long.parseLong(args[0]);
        // Initialise the management classes here, not inside the measured method.
        mx = ManagementFactory.getThreadMXBean();
        mx.getCurrentThreadCpuTime();
        Thread a = new Thread(() -> burn(ms), "spin-a");
        Thread b = new Thread(() -> burn(ms), "spin-b");
        a.start();
        b.start();
        a.join();
        b.join();
        System.out.println("spin done");
    }
}
