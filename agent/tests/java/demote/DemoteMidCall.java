import java.lang.reflect.Field;
import java.util.Arrays;

/**
 * Demotion while calls are open (agent/tests/rewrite.rs): a recursion that
 * demotes every method at its bottom, through the agent's own switch
 * (jtrace.Probe.DEMOTED, set by reflection here as the demoter sets it
 * through JNI), then unwinds normally; another that demotes and unwinds by
 * an exception; then calls made after the demotion. Every call entered
 * before the switch must record its exit, none after it anything. With
 * "jit": a method compiled before the demotion, and one compiled after it
 * (where the JIT takes the demotion for a constant), record nothing after
 * it.
 */
public class DemoteMidCall {
    static int depth(int n, boolean demote) throws Exception {
        if (n == 0) {
            if (demote) {
                demoteAll();
            }
            return 0;
        }
        return 1 + depth(n - 1, demote);
    }

    static int thrower(int n) throws Exception {
        if (n == 0) {
            demoteAll();
            throw new IllegalStateException("bottom");
        }
        return thrower(n - 1) + 1;
    }

    static int later(int n) {
        return n == 0 ? 0 : 1 + later(n - 1);
    }

    /** Marks every id below 2^16 demoted, as the demoter does. */
    static void demoteAll() throws Exception {
        Field f = Class.forName("jtrace.Probe").getDeclaredField("DEMOTED");
        f.setAccessible(true);
        byte[] marks = (byte[]) f.get(null);
        Arrays.fill(marks, 0, 1 << 16, (byte) 1);
    }

    public static void main(String[] args) throws Exception {
        int sum = 0;
        if (args.length > 0 && args[0].equals("jit")) {
            // -Xbatch: compiled before the demotion (depth), after it (later).
            for (int i = 0; i < 30000; i++) {
                sum += depth(3, false);
            }
            demoteAll();
            for (int i = 0; i < 30000; i++) {
                sum += depth(3, false) + later(3);
            }
            System.out.println("SUM " + sum);
            return;
        }
        for (int i = 0; i < 5; i++) {
            sum += depth(10, false);
        }
        if (args.length > 0 && args[0].equals("throw")) {
            try {
                thrower(5);
            } catch (IllegalStateException e) {
                sum += 100;
            }
        } else {
            sum += depth(10, true);
        }
        for (int i = 0; i < 3; i++) {
            sum += depth(10, false) + depth(3, false);
        }
        System.out.println("SUM " + sum);
    }
}
