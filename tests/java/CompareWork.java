/**
 * The workload of `jtrace report --compare`'s test (tests/report_compare.rs):
 * CALLS rounds of two calls, {@code Work.nap} sleeping NAP_MILLIS (the
 * figure the test changes between two recordings) and {@code Work.steady}
 * sleeping 10 ms (the same in every recording); NAP_MILLIS 0 leaves nap
 * out. The traced methods are in a class of their own, so that the
 * untraced main does not sum them up.
 *
 * Usage: CompareWork CALLS NAP_MILLIS
 */
public class CompareWork {
    static final class Work {
        static void nap(long millis) throws InterruptedException {
            Thread.sleep(millis);
        }

        static void steady() throws InterruptedException {
            Thread.sleep(10);
        }
    }

    public static void main(String[] args) throws Exception {
        int calls = Integer.parseInt(args[0]);
        long millis = Long.parseLong(args[1]);
        for (int i = 0; i < calls; i++) {
            if (millis > 0) {
                Work.nap(millis);
            }
            Work.steady();
        }
        System.out.println("compare-work " + calls + " " + millis);
    }
}
