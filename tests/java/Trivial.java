/**
 * The trivial-method rule's workload: a getter ({@code Work.value}: trivial,
 * so not instrumented unless {@code --complete}), a busy method that loops
 * ({@code Work.crunch}) and one that sleeps in one call of 64
 * ({@code Work.napper}), reached through a forwarder ({@code Work.relay}:
 * a short method whose one call is to a selected method, so not
 * instrumented when a wildcard selected it, traced when named outright),
 * all selected by one broad pattern. Each is called
 * fewer times than adaptive demotion needs to consider it, so every call
 * of the last two is recorded. Prints how often each was called.
 */
public class Trivial {
    static long sink;

    static final class Work {
        private int v;

        Work(int v) {
            this.v = v;
        }

        int value() {
            return v;
        }

        long crunch(int n) {
            long acc = 0;
            for (int k = 0; k < n; k++) {
                acc = acc * 31 + value() + k;
            }
            return acc;
        }

        void relay(int i) throws InterruptedException {
            napper(i);
        }

        void napper(int i) throws InterruptedException {
            if ((i & 63) == 0) {
                Thread.sleep(2);
            }
            sink += value();
        }
    }

    public static void main(String[] args) throws Exception {
        int rounds = Integer.parseInt(args[0]);
        Work w = new Work(7);
        long values = 0;
        for (int i = 0; i < rounds; i++) {
            sink += w.crunch(200);
            values += 200;
            w.relay(i);
            values += 1;
        }
        System.out.println("value " + values + " crunch " + rounds + " napper " + rounds + " sink " + sink);
    }
}
