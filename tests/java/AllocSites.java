import java.util.ArrayList;
import java.util.List;

/**
 * Allocations at two known sites (tests/run_e2e.rs, `allocation_sites`):
 * int[64] arrays in ints() (line 14) and 4 KiB byte arrays in blocks()
 * (line 20), on thread "allocator". Usage: java AllocSites <rounds>
 */
public class AllocSites {
    static final List<Object> keep = new ArrayList<>();

    static void ints(int n) {
        for (int i = 0; i < n; i++) {
            keep.add(new int[64]);
        }
    }

    static void blocks(int n) {
        for (int i = 0; i < n; i++) {
            keep.add(new byte[4096]);
        }
    }

    public static void main(String[] args) throws Exception {
        int rounds = Integer.parseInt(args[0]);
        Thread t = new Thread(() -> {
            for (int r = 0; r < rounds; r++) {
                ints(10_000);
                blocks(1_000);
                keep.clear();
            }
        }, "allocator");
        t.start();
        t.join();
        System.out.println("DONE");
    }
}
