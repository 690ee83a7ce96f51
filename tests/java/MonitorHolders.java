/**
 * One wait, several holders: thread "waiter" blocks entering one
 * {@code synchronized} monitor (of class {@link Gate}) in {@link #enter}
 * while threads "holder-1" … "holder-N" take it in turn, each for HOLD ms.
 * Each next holder starts its enter just before the previous one releases,
 * so it takes the monitor first (it is running; the waiter must be woken)
 * and the waiter, woken by each release, blocks again behind the next one.
 * Usage: MonitorHolders <holders> <holdMs>
 * Prints the order in which the threads held the monitor.
 */
public class MonitorHolders {
    static final class Gate {
        int turns;
    }

    static final Gate GATE = new Gate();
    static final StringBuffer order = new StringBuffer();
    static volatile long releaseAt;
    static volatile long sink;

    static void hold(String name, long holdMs) {
        synchronized (GATE) {
            order.append(name).append(' ');
            GATE.turns++;
            long end = System.nanoTime() + holdMs * 1_000_000L;
            releaseAt = end;
            while (System.nanoTime() < end) {
                sink++;
            }
        }
    }

    static void enter() {
        synchronized (GATE) {
            order.append("waiter ");
        }
    }

    public static void main(String[] args) throws Exception {
        int holders = Integer.parseInt(args[0]);
        long holdMs = Long.parseLong(args[1]);
        Thread[] hs = new Thread[holders];
        Thread first = new Thread(() -> hold("holder-1", holdMs), "holder-1");
        hs[0] = first;
        releaseAt = Long.MAX_VALUE;
        first.start();
        while (GATE.turns == 0) {
            Thread.onSpinWait();
        }
        Thread waiter = new Thread(MonitorHolders::enter, "waiter");
        waiter.start();
        for (int i = 1; i < holders; i++) {
            final String name = "holder-" + (i + 1);
            final int turn = i;
            hs[i] = new Thread(() -> {
                // Arrive 300 µs before the previous holder releases: running
                // (spinning) then, it takes the monitor the release frees.
                while (GATE.turns < turn || System.nanoTime() < releaseAt - 300_000L) {
                    Thread.onSpinWait();
                }
                hold(name, holdMs);
            }, name);
            hs[i].start();
        }
        for (Thread h : hs) {
            h.join();
        }
        waiter.join();
        System.out.println(order.toString().trim());
    }
}
