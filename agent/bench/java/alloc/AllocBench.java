import java.util.ArrayList;
import java.util.List;

/**
 * Allocation-heavy loop for agent/bench/alloc_cost.sh: int[64] and byte[24]
 * pairs (312 bytes per iteration), kept in a list that is cleared every
 * 100 000 objects. Usage: java AllocBench <iterations>; prints "MS <ms>" of
 * the measured phase (after two warm-up passes of a quarter each).
 */
public class AllocBench {
    static List<Object> keep = new ArrayList<>();

    public static void main(String[] a) {
        int n = Integer.parseInt(a[0]);
        for (int w = 0; w < 2; w++) {
            run(n / 4);
        }
        long t0 = System.nanoTime();
        run(n);
        long t1 = System.nanoTime();
        System.out.printf("MS %.1f%n", (t1 - t0) / 1e6);
    }

    static void run(int n) {
        for (int i = 0; i < n; i++) {
            keep.add(new int[64]);
            keep.add(new byte[24]);
            if (keep.size() > 100000) {
                keep.clear();
            }
        }
    }
}
