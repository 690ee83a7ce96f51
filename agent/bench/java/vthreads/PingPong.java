package vthreads;

import java.util.concurrent.locks.LockSupport;

/**
 * Virtual-thread ping-pong for the mount/unmount tracking benchmark
 * (agent/bench/vthread_cost.sh). Usage: java vthreads.PingPong <round trips> <rounds> [clocks]
 *
 * Two virtual threads hand a token back and forth with LockSupport
 * park/unpark: every hand-over unmounts one virtual thread and mounts the
 * other. Per round prints "ROUND <ns per round trip>". With `clocks`, each
 * hand-over also reads System.nanoTime() that many times, untraced: the
 * floor of any tracer that timestamps each mount, unmount and unpark.
 * Compiled for Java 11:
 * virtual threads are started through reflection (JDK 21 and later).
 */
public final class PingPong {
    static volatile int turn;
    static volatile Thread ping;
    static volatile Thread pong;
    static int clocks;
    static volatile long sink;

    static Thread startVirtual(Runnable r) throws Exception {
        return (Thread) Thread.class.getMethod("startVirtualThread", Runnable.class).invoke(null, r);
    }

    /** Waits for `mine`, then passes the turn to `other`, `n` times. */
    static void play(int n, int mine, int other, boolean pingSide) {
        // Both threads known before the first hand-over (an unpark of a
        // thread not yet known would be lost).
        while (ping == null || pong == null) {
            Thread.onSpinWait();
        }
        for (int i = 0; i < n; i++) {
            while (turn != mine) {
                LockSupport.park();
            }
            turn = other;
            long t = 0;
            for (int c = 0; c < clocks; c++) {
                t += System.nanoTime();
            }
            if (clocks > 0) {
                sink = t;
            }
            LockSupport.unpark(pingSide ? pong : ping);
        }
    }

    static double round(int n) throws Exception {
        turn = 0;
        ping = null;
        pong = null;
        long t0 = System.nanoTime();
        Thread a = startVirtual(() -> play(n, 0, 1, true));
        ping = a;
        Thread b = startVirtual(() -> play(n, 1, 0, false));
        pong = b;
        LockSupport.unpark(a);
        a.join();
        b.join();
        return (System.nanoTime() - t0) / (double) n;
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        int rounds = Integer.parseInt(args[1]);
        clocks = args.length > 2 ? Integer.parseInt(args[2]) : 0;
        round(n / 4);
        for (int r = 0; r < rounds; r++) {
            System.out.printf("ROUND %.1f%n", round(n));
        }
    }
}
