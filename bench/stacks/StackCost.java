import java.util.concurrent.locks.LockSupport;

/**
 * Workloads for bench/stacks_cost.sh. Prints "MS <elapsed ms>" (measured
 * inside the JVM, start-up excluded).
 *   java StackCost pingpong <round trips> <work per hop> [pause ms]
 *     two platform threads hand a token back and forth with park/unpark
 *     (run on one CPU: two context switches per round trip), each doing
 *     <work> multiply-adds per hop, a few Java frames deep; with a pause,
 *     prints "READY" and sleeps that long before the run, and again after
 *     "MS" (bench/stacks_bpf_time.sh reads the BPF programs' run time
 *     around the run);
 *   java StackCost compute <iterations>
 *     a CPU-bound call tree (the cost of -XX:+PreserveFramePointer).
 */
public final class StackCost {
    static volatile int turn;
    static volatile Thread ping, pong;
    static volatile long sink;

    static long work(long n) {
        long x = sink;
        for (long i = 0; i < n; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        return x;
    }

    static void hop(int mine, int other, Thread peer, long w) {
        while (turn != mine) LockSupport.park();
        sink += work(w);
        turn = other;
        LockSupport.unpark(peer);
    }

    static void side(int n, int mine, int other, boolean pingSide, long w) {
        while (ping == null || pong == null) Thread.onSpinWait();
        for (int i = 0; i < n; i++) hop(mine, other, pingSide ? pong : ping, w);
    }

    static long fib(int n) {
        return n < 2 ? n : fib(n - 1) + fib(n - 2);
    }

    public static void main(String[] args) throws Exception {
        long t0 = System.nanoTime();
        if (args[0].equals("pingpong")) {
            int n = Integer.parseInt(args[1]);
            long w = Long.parseLong(args[2]);
            Thread a = new Thread(() -> side(n, 0, 1, true, w), "ping");
            Thread b = new Thread(() -> side(n, 1, 0, false, w), "pong");
            ping = a;
            pong = b;
            long pause = args.length > 3 ? Long.parseLong(args[3]) : 0;
            if (pause > 0) {
                System.out.println("READY");
                System.out.flush();
                Thread.sleep(pause);
            }
            t0 = System.nanoTime();
            a.start();
            b.start();
            a.join();
            b.join();
        } else {
            int n = Integer.parseInt(args[1]);
            for (int i = 0; i < n; i++) sink += fib(27);
        }
        System.out.printf("MS %.1f%n", (System.nanoTime() - t0) / 1e6);
        System.out.flush();
        if (args[0].equals("pingpong") && args.length > 3) Thread.sleep(Long.parseLong(args[3]));
    }
}
