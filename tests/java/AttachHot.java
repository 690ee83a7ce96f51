import java.io.InputStream;

/**
 * A program started without any agent, for `jtrace attach` tests of
 * adaptive demotion across sessions. Thread "hot-worker" calls {@link #tiny}
 * (a few ns of arithmetic) in a loop until the program's stdin is closed:
 * hot, short and never blocking, so a session tracing it demotes it. Prints
 * "ready" once the loop runs, and the number of calls at the end.
 */
public class AttachHot {
    static volatile boolean stop;
    static volatile boolean running;

    static long tiny(long x) {
        for (int k = 0; k < 8; k++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        final long[] result = new long[2];
        Thread worker = new Thread(() -> {
            long x = 1;
            long n = 0;
            running = true;
            while (!stop) {
                x = tiny(x);
                n++;
            }
            result[0] = n;
            result[1] = x;
        }, "hot-worker");
        worker.start();
        while (!running) {
            Thread.sleep(1);
        }
        System.out.println("ready");
        System.out.flush();
        InputStream in = System.in;
        while (in.read() >= 0) {
            // until stdin is closed
        }
        stop = true;
        worker.join();
        System.out.println("calls " + result[0] + " " + (result[1] != 0));
    }
}
